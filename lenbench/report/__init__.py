"""The report path: rows, statistics, tables, figures and the HTML page."""

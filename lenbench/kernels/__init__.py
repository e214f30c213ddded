"""Fused forward kernels of the encodings, chosen by what an encoding declares."""

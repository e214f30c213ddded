"""Work around a torch inductor bug in CPU flex_attention (`patch_inductor_flex_cpu_names`).

Applied once, on the first compiled flex call on the CPU (`lenbench.kernels.bias.attention_flex`);
a torch without the buggy code is left untouched.
"""

from __future__ import annotations

_PATCHED = False


def patch_inductor_flex_cpu_names() -> None:
    """Work around a torch inductor bug in CPU flex_attention (seen in torch 2.13).

    The C++ template renames its two block-size symbols by plain substring replacement, so a
    kernel with more than ten size arguments turns e.g. `ks15` into `cur_kvSplitSize5` when the
    block size is `ks1`, and the C++ compile fails ("'cur_kvSplitSize5' was not declared").
    Score modifiers that index tensors with computed indices (position gathers, the T5 table)
    hit it. This swaps the two `str.replace` calls for whole-word `re.sub` calls in that one
    method; nothing is patched when the installed torch does not contain the buggy code.
    """
    global _PATCHED
    if _PATCHED:
        return
    _PATCHED = True
    try:
        import inspect
        import re
        import textwrap

        import torch._inductor.lowering  # noqa: F401 - imports the template module without an import cycle
        from torch._inductor.codegen import cpp_flex_attention_template as mod

        cls = mod.CppFlexAttentionTemplate
        src = textwrap.dedent(inspect.getsource(cls.modification))
        pattern = re.compile(r'output_code\.replace\(\s*(kernel_group\.args\.sizevars\[var_\w+_symbol\]),\s*("cur_\w+SplitSize"),?\s*\)')
        if len(pattern.findall(src)) != 2:
            return
        fixed = pattern.sub(r're.sub(r"\\b" + re.escape(\1) + r"\\b", \2, output_code)', src)
        namespace = dict(vars(mod))
        namespace["re"] = re
        exec(compile(fixed, mod.__file__, "exec"), namespace)  # noqa: S102 - torch's own method, fixed
        cls.modification = namespace["modification"]
    except Exception:  # noqa: BLE001 - a torch without this code path needs no fix
        return


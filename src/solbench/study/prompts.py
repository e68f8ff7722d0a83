"""Prompts for ``solbench generate``, in the style of each problem's source.

* KernelBench problems (a ``.py`` with ``class Model``): the reference architecture whole, and
  the contract KernelBench states: write ``class ModelNew`` with the same constructor and
  ``forward`` signature, replacing operators with custom kernels, and reply with the complete
  file in one code block, no test code.
* Problem directories (SOL-ExecBench / FlashInfer-Bench, solbench's suites): the definition
  (axes, inputs and outputs with shapes and dtypes, the reference's ``run``) and the solution
  format: a Python file defining ``run(<inputs in definition order>)`` that returns the
  outputs (``destination_passing_style`` false), or for CUDA C++ one ``.cu`` file whose
  module binds ``run`` through pybind11.

The target language (``pytorch``, ``triton``, ``cuda``) is named in the prompt. Refinement
turns (:func:`feedback_message`) give back the verdict and the evaluation log of the last
attempt, as KernelBench's multi-turn setting does.
"""

from __future__ import annotations

import json
import re

from ..spec import Problem

LANGUAGES = ("pytorch", "triton", "cuda")

_SYSTEM = ("You are an expert in GPU performance engineering. You write correct, fast kernels "
           "and reply with complete, runnable code.")

_LANG_TEXT = {
    "pytorch": "PyTorch (any torch operators; the aim is a faster program than the reference)",
    "triton": "Triton (kernels written with @triton.jit, launched from Python)",
    "cuda": "CUDA C++ (custom kernels compiled at run time)",
}


def system_message() -> dict:
    return {"role": "system", "content": _SYSTEM}


def _kernelbench_prompt(problem: Problem, language: str) -> str:
    src = problem.path.read_text()
    how = {
        "pytorch": "Rewrite the operators with faster PyTorch code (fusing, better algorithms, "
                   "avoiding copies).",
        "triton": "Replace operators with custom Triton kernels (import triton, "
                  "triton.language as tl), launched from ModelNew.forward.",
        "cuda": "Replace operators with custom CUDA kernels compiled inline with "
                "torch.utils.cpp_extension.load_inline and called from ModelNew.forward.",
    }[language]
    return (
        f"You are given the following PyTorch architecture, `Model`:\n\n```python\n{src.rstrip()}\n```\n\n"
        f"Write an optimised version of it named `ModelNew` in {_LANG_TEXT[language]}. {how} "
        "You may replace some operators and keep others, fuse several into one kernel, or change "
        "the algorithm, as long as the outputs stay numerically equal to Model's within "
        "floating-point tolerance.\n\n"
        "Contract: `ModelNew` is an `nn.Module` constructed with the same arguments as `Model` "
        "(from `get_init_inputs()`) and called with the same inputs (from `get_inputs()`); its "
        "`forward` returns what `Model.forward` returns. Parameters are created in the same "
        "order, so both modules start from equal weights.\n\n"
        "Reply with the complete Python file defining `ModelNew` (and any imports and helpers it "
        "needs) in one ```python code block. Real, compilable code only: no pseudocode, no test "
        "code, no example usage.")


def _definition_text(problem: Problem) -> str:
    d = problem.definition
    data = json.loads(d.model_dump_json(exclude_none=True))
    data.pop("reference", None)
    text = json.dumps(data, indent=1)
    # lists of scalars (shapes) on one line: the same JSON in fewer tokens
    return re.sub(r"\[\s*([^\[\]{}]*?)\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text)


def _signature(problem: Problem) -> str:
    d = problem.definition
    return f"run({', '.join(d.inputs)})"


def _directory_prompt(problem: Problem, language: str) -> str:
    d = problem.definition
    outs = ", ".join(d.outputs)
    if language == "cuda":
        fmt = ("Reply with one CUDA C++ source file in one ```cuda code block. It includes "
               "<torch/extension.h>, defines the kernels, a host function `run` taking the inputs "
               f"as torch::Tensor (and scalars) in this order: {', '.join(d.inputs)}, and returning "
               f"the output{'s as a std::tuple of torch::Tensor' if len(d.outputs) > 1 else ' tensor'} "
               f"({outs}), and binds it with PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) "
               "{ m.def(\"run\", &run); }. It is built with torch.utils.cpp_extension.")
    else:
        fmt = (f"Reply with one Python file in one ```python code block defining `{_signature(problem)}` "
               f"with the inputs in this order; it returns the output{'s as a tuple' if len(d.outputs) > 1 else ''} "
               f"({outs}) with the shapes and dtypes of the definition, on the inputs' device."
               + (" Import triton and triton.language as tl and launch your @triton.jit kernels "
                  "from run." if language == "triton" else ""))
    return (
        f"Implement the operation `{d.name}` in {_LANG_TEXT[language]}.\n\n"
        f"Its definition (axes are dimensions: `const` fixed, `var` given per workload; inputs and "
        f"outputs in call order, with shapes in those axes and dtypes):\n\n```json\n{_definition_text(problem)}\n```\n\n"
        f"The reference implementation, which defines the correct outputs:\n\n"
        f"```python\n{d.reference.rstrip()}\n```\n\n"
        "Your implementation is checked against the reference on every workload (fresh random "
        "inputs, the definition's tolerance) and timed against it; it must be correct for every "
        "value of the `var` axes, not only one shape.\n\n"
        f"{fmt} Real, compilable code only: no pseudocode, no test code.")


def initial_messages(problem: Problem, language: str) -> list[dict]:
    """The first turn's chat messages (system + user) for ``problem`` in ``language``
    (one of :data:`LANGUAGES`). Raises ValueError for another language."""
    if language not in LANGUAGES:
        raise ValueError(f"language {language!r} not in {LANGUAGES}")
    body = (_kernelbench_prompt(problem, language) if problem.kind == "kernelbench"
            else _directory_prompt(problem, language))
    return [system_message(), {"role": "user", "content": body}]


def feedback_message(verdict: str, log: str) -> dict:
    """The user message of a refinement turn: the last attempt's verdict (status per
    workload, errors, speedup) and its log, asking for an improved version."""
    return {"role": "user", "content": (
        f"Your last attempt was evaluated.\n\nVerdict:\n{verdict}\n\n"
        + (f"Evaluation log (truncated):\n```\n{log}\n```\n\n" if log.strip() else "")
        + "Fix any error, keep the outputs correct, and make it faster if you can. Reply with "
          "the complete file again in one code block.")}

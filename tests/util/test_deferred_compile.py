"""``josh.util.deferred_compile``: bitsandbytes' CPU ops are wrapped by ``torch.compile`` at their first call, the
same ops computing the same values, and importing bitsandbytes no longer imports torch's inductor."""

from __future__ import annotations

import importlib.machinery
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from josh.util import deferred_compile
from josh.util.deferred_compile import DeferredCompileFinder, deferred

ROOT = Path(__file__).resolve().parents[2]


def recorder() -> tuple[list, object]:
    calls: list = []

    def compile_now(fn, **options):
        calls.append((fn.__name__, options))
        return lambda *args, **kwargs: ("compiled", fn(*args, **kwargs))

    return calls, compile_now


def test_deferred_compiles_at_the_first_call_only_and_passes_options_and_results_through() -> None:
    calls, compile_now = recorder()

    def double(x: int) -> int:
        return 2 * x

    wrapped = deferred(compile_now)(double, dynamic=False)
    assert calls == [] and wrapped.__name__ == "double" and wrapped.__wrapped__ is double
    assert wrapped(3) == ("compiled", 6) and wrapped(x=4) == ("compiled", 8)
    assert calls == [("double", {"dynamic": False})]


def test_deferred_works_as_a_decorator_with_options() -> None:
    calls, compile_now = recorder()

    @deferred(compile_now)(mode="reduce-overhead")
    def inc(x: int) -> int:
        return x + 1

    assert calls == []
    assert inc(1) == ("compiled", 2)
    assert calls == [("inc", {"mode": "reduce-overhead"})]


def test_install_puts_one_finder_ahead_of_the_path_finder_and_it_claims_only_the_listed_modules() -> None:
    deferred_compile.install()
    deferred_compile.install()
    finders = [f for f in sys.meta_path if isinstance(f, DeferredCompileFinder)]
    assert len(finders) == 1
    assert sys.meta_path.index(finders[0]) < sys.meta_path.index(importlib.machinery.PathFinder)
    assert finders[0].find_spec("json", None) is None
    assert finders[0].find_spec("bitsandbytes.backends.default", None) is None


def run(code: str) -> dict:
    """``code`` in a fresh interpreter (a process that has imported neither josh nor bitsandbytes); its JSON line."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("josh_first", [True, False])
def test_importing_bitsandbytes_after_josh_leaves_torchs_inductor_unimported(josh_first: bool) -> None:
    """The control (bitsandbytes imported without josh) imports inductor: what the finder saves is real."""
    pytest.importorskip("bitsandbytes")
    seen = run(f"""
        import json, sys
        if {josh_first}:
            import josh
        import bitsandbytes
        ops = sys.modules["bitsandbytes.backends.default.ops"]
        print(json.dumps({{"inductor": "torch._inductor.compile_fx" in sys.modules,
                           "loader": type(ops.__spec__.loader).__name__}}))
        """)
    assert seen == ({"inductor": False, "loader": "_DeferringLoader"} if josh_first else {
        "inductor": True, "loader": "SourceFileLoader"})  # fmt: skip


def test_a_deferred_bitsandbytes_op_is_compiled_at_its_first_call_and_computes_what_the_op_computes() -> None:
    """bitsandbytes' real 4-bit dequantisation op, with ``torch.compile`` replaced by a recorder before the import:
    nothing is compiled at import (bitsandbytes alone compiles four ops there), the op once at its first call with
    bitsandbytes' own options, and its output equals the uncompiled function's."""
    pytest.importorskip("bitsandbytes")
    seen = run("""
        import json, sys
        import torch
        calls = []
        def compile_now(fn, **options):
            calls.append([fn.__name__, options])
            return fn
        torch.compile = compile_now
        import josh
        import bitsandbytes
        at_import = list(calls)
        ops = sys.modules["bitsandbytes.backends.default.ops"]
        packed = torch.tensor([0x1F, 0x73, 0xA4], dtype=torch.uint8)
        args = (packed, torch.tensor([2.0, 0.5]), torch.linspace(-1, 1, 16), 4, (6,), torch.float32)
        out = ops._dequantize_4bit_compute(*args)
        again = ops._dequantize_4bit_compute(*args)
        expected = ops._dequantize_4bit_compute.__wrapped__(*args)
        print(json.dumps({"at_import": at_import, "calls": calls, "same": torch.equal(out, expected),
                          "again": torch.equal(again, expected), "restored": torch.compile is compile_now,
                          "values": out.tolist()}))
        """)
    assert seen["at_import"] == [] and seen["calls"] == [["_dequantize_4bit_compute", {"dynamic": False}]]
    assert seen["same"] and seen["again"] and seen["restored"]
    # nibbles 1,15,7,3,10,4 of the 16-value code, times the block scale (2.0, then 0.5 from the fifth value on)
    code = [-1 + 2 * i / 15 for i in range(16)]
    assert seen["values"] == pytest.approx([2 * code[1], 2 * code[15], 2 * code[7], 2 * code[3], 0.5 * code[10],
                                            0.5 * code[4]])  # fmt: skip

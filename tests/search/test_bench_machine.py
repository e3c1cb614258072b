"""bench.common names the CPU extensions the int8 embedder's speed depends on, so two runs on different hosts
are not read as a regression (the 39 -> 14.9 chunks/s of bench/RESULTS.md, 2026-11-29, was an AVX2-only host)."""

from __future__ import annotations

from bench.common import cpu_extensions, cpu_line

ZEN3_FLAGS = "fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 sha_ni vaes vpclmulqdq"
ZEN4_FLAGS = ZEN3_FLAGS + " avx512f avx512dq avx512bw avx512vl avx512_bf16 avx512_vnni avx512_bitalg"


def test_extensions_read_from_a_flags_line() -> None:
    assert cpu_extensions(ZEN3_FLAGS) == ["avx2"]
    assert cpu_extensions(ZEN4_FLAGS) == ["avx2", "avx512f", "avx512_vnni"]
    assert cpu_extensions("") == []


def test_the_report_line_says_when_int8_has_no_vnni() -> None:
    machine = {"cpu": "AMD EPYC", "cpu_model": "family 25 model 1", "cpu_extensions": cpu_extensions(ZEN3_FLAGS)}
    assert cpu_line(machine) == "AMD EPYC (family 25 model 1), avx2 (no VNNI: slow int8)"
    machine["cpu_extensions"] = cpu_extensions(ZEN4_FLAGS)
    assert cpu_line(machine) == "AMD EPYC (family 25 model 1), avx2, avx512f, avx512_vnni"

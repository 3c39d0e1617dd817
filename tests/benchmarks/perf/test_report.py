"""benchmarks.perf.report: ratios against the row named 'reference', and the tokens/s column when recorded."""

from benchmarks.perf.report import speedup_table, to_markdown


def _bench(name: str, mean: float, **extra) -> dict:
    return {
        "name": name,
        "group": "g",
        "stats": {"mean": mean, "min": mean / 2, "rounds": 4},
        "extra_info": extra,
    }


def test_speedup_is_reference_mean_over_row_mean():
    rows = speedup_table({"benchmarks": [_bench("test_reference", 2.0), _bench("test_fast", 0.5)]})
    by_name = {r["name"]: r for r in rows}
    assert by_name["test_fast"]["speedup_vs_reference"] == 4.0
    assert by_name["test_reference"]["speedup_vs_reference"] == 1.0
    assert "tokens/s" not in to_markdown(rows)


def test_tokens_per_s_column_when_a_benchmark_records_it():
    rows = speedup_table({"benchmarks": [_bench("test_reference", 2.0, tokens_per_s=800.4),
                                         _bench("test_batched", 1.0)]})  # fmt: skip
    table = to_markdown(rows)
    assert "tokens/s |" in table.splitlines()[0]
    assert "| 2.00x | - |" in table and "| 1.00x | 800 |" in table

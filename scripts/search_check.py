"""Per-bucket trial sequences of a tune run's store against the exhaustive-grid bests of
docs/perf_logs/grid72.txt (fp8 decode n1, full lengths): how many trials until one is within 3%.
Usage: python scripts/search_check.py STORE.sqlite"""
import sqlite3
import sys

GRID_BEST_MS = {(64, 8192): 0.0250, (64, 32768): 0.0825, (256, 131072): 1.296}
con = sqlite3.connect(sys.argv[1])
con.row_factory = sqlite3.Row
for (b, c), g in GRID_BEST_MS.items():
    rows = con.execute("select variant, status, p50_ms, source from trials where bucket_batch=? and bucket_context=? "
                       "and json_extract(problem_json, '$.next_n') = 1 order by created_at, rowid", (b, c)).fetchall()
    ok = [r for r in rows if r["status"] == "ok"]
    first = next((i for i, r in enumerate(ok, 1) if r["p50_ms"] <= 1.03 * g), None)
    best = min(ok, key=lambda r: r["p50_ms"]) if ok else None
    print(f"{b}x{c}: grid best {g * 1e3:.1f} us; {len(ok)} timed; best {best['p50_ms'] * 1e3:.1f} us "
          f"({best['variant'].split('__')[2]}, {best['source']}); first within 3%: trial {first}")

"""Issue 3, the seed scenario end to end: an analyst's spreadsheet of a year of
daily sales goes in through the files API, pandas sums it by month,
matplotlib charts the trend, and the chart comes back both as a display and as
a file — with monthly sums that match what the host computes from the same
rows."""
import datetime
import io
import json
import random
import time

import pytest

from helpers_exec import decode_png, files_url, get_bytes, new_session, png_size, put_bytes, PNG_SIG

try:
    import openpyxl
except ImportError:  # pragma: no cover - the set-up installs python3-openpyxl
    openpyxl = None

REGIONS = ("north", "south", "west")


def sales_rows(year=2023, seed=20231):
    """One row per day and region: (date, region, units, unit_price, revenue)."""
    rng = random.Random(seed)
    day = datetime.date(year, 1, 1)
    rows = []
    while day.year == year:
        season = 1.0 + 0.5 * (day.month - 1) / 11          # a rising trend
        for region in REGIONS:
            units = int(rng.randint(20, 80) * season)
            price = round(rng.uniform(4.0, 12.0), 2)
            rows.append((datetime.datetime(day.year, day.month, day.day), region, units, price,
                         round(units * price, 2)))
        day += datetime.timedelta(days=1)
    return rows


def xlsx_bytes(rows):
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "sales"
    ws.append(["date", "region", "units", "unit_price", "revenue"])
    for r in rows:
        ws.append(list(r))
    buf = io.BytesIO()
    wb.save(buf)
    return buf.getvalue()


ANALYSIS = """\
import json
import pandas as pd
import matplotlib.pyplot as plt

df = pd.read_excel('sales.xlsx', sheet_name='sales')
df['date'] = pd.to_datetime(df['date'])
monthly = df.set_index('date')['revenue'].resample('M').sum()
print(json.dumps({d.strftime('%Y-%m'): round(float(v), 2) for d, v in monthly.items()}))

fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(monthly.index.strftime('%b'), monthly.values, marker='o')
ax.set_title('Monthly revenue')
ax.set_ylabel('revenue')
plt.savefig('trend.png')
plt.show()
len(df)
"""


def test_seed_sales_workbook_to_monthly_trend(daemon, api):
    if openpyxl is None:
        pytest.fail("the host needs openpyxl (Debian: apt-get install python3-openpyxl)")
    rows = sales_rows()
    assert len(rows) == 365 * len(REGIONS)
    expected = {}
    for date, _, _, _, revenue in rows:
        key = date.strftime("%Y-%m")
        expected[key] = expected.get(key, 0.0) + revenue
    data = xlsx_bytes(rows)

    with new_session(api) as s:
        sid = s["id"]
        t0 = time.monotonic()
        status, doc = put_bytes(daemon.port, sid, "sales.xlsx", data)
        assert status == 201 and doc == {"path": "sales.xlsx", "size": len(data)}, (status, doc)

        r = api.exec(sid, ANALYSIS)
        took = time.monotonic() - t0
        print("\n[measure] seed scenario: upload + analysis %.2f s (exec duration_ms %s)"
              % (took, r.get("duration_ms")))
        assert r["status"] == "ok", (r["error"], r["stderr"][-2000:])
        assert r["result"] == str(len(rows))

        # The 12 monthly sums the code printed are the host's sums.
        got = json.loads(r["stdout"].strip().splitlines()[-1])
        assert sorted(got) == sorted(expected) and len(got) == 12, got
        for month, value in expected.items():
            assert abs(got[month] - value) < 0.01, (month, got[month], value)

        # The chart came back as a display ...
        assert [d["mime"] for d in r["display"]] == ["text/plain", "image/png"], r["display"]
        shown = decode_png(r["display"][1]["data"])
        w, h = png_size(shown)
        assert w >= 200 and h >= 100, (w, h)

        # ... and as a file the files list names and the files API returns.
        changes = {f["path"]: f for f in r["files"]}
        assert "trend.png" in changes and changes["trend.png"]["change"] == "created", r["files"]
        assert "sales.xlsx" not in changes        # uploaded before, not changed by the code
        status, _, png = get_bytes(daemon.port, sid, "trend.png")
        assert status == 200 and png.startswith(PNG_SIG), (status, png[:16])
        assert len(png) == changes["trend.png"]["size"]
        assert png_size(png) == (800, 400), png_size(png)   # figsize 8x4 at 100 dpi

        # The workbook still reads back unchanged.
        status, _, back = get_bytes(daemon.port, sid, "sales.xlsx")
        assert status == 200 and back == data
        status, listing = api.request("GET", files_url(sid))
        names = {f["path"] for f in listing["files"]}
        assert {"sales.xlsx", "trend.png"} <= names, names

"""Deterministic generator of large raw order partitions (a development tool for tests and benchmarks).

The output follows the raw-partition format of the data contract and mixes in
dirty rows for every row-level quarantine reason plus duplicates, in known
numbers, so a loader's figures can be checked against what was written.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import tempfile
from collections.abc import Callable
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

HEADER = "order_id,order_ts,customer_id,kota,produk,qty,harga_satuan,diskon\n"

# Row-level reasons the generator can produce, with their share of the dirty rows.
DIRT_WEIGHTS = {
    "missing_order_id": 6,
    "bad_order_ts": 14,
    "wrong_date": 20,
    "missing_kota": 10,
    "bad_qty": 12,
    "bad_price": 12,
    "bad_discount": 12,
    "malformed_row": 14,
}

# (name, weight): bigger cities order more.
KOTA = (
    ("Jakarta Selatan", 12),
    ("Jakarta Barat", 9),
    ("Jakarta Timur", 9),
    ("Jakarta Utara", 6),
    ("Jakarta Pusat", 5),
    ("Tangerang", 7),
    ("Bekasi", 7),
    ("Depok", 5),
    ("Bogor", 5),
    ("Bandung", 9),
    ("Semarang", 5),
    ("Yogyakarta", 4),
    ("Surabaya", 9),
    ("Malang", 3),
    ("Denpasar", 3),
    ("Medan", 6),
    ("Palembang", 3),
    ("Pekanbaru", 2),
    ("Makassar", 3),
    ("Balikpapan", 2),
)

_COLORS = ("Hitam", "Putih", "Navy", "Abu-abu", "Maroon")
_SIZES = ("S", "M", "L", "XL", "XXL")
_WEIGHTS = ("100g", "250g", "500g", "1kg", "2kg")
_PACKS = ("isi 1", "isi 2", "isi 3", "isi 6", "isi 12")
_MODELS = ("Lite", "Basic", "Plus", "Pro", "Max")

# (base name, base price in IDR, variants, price factor per variant step)
_PRODUCTS = (
    ("Kaos Polos", 59000, _COLORS, 0.0),
    ("Kemeja Flanel", 129000, _SIZES, 0.05),
    ("Kemeja Batik Pria", 189000, _SIZES, 0.05),
    ("Celana Chino", 159000, _SIZES, 0.05),
    ("Jilbab Paris", 35000, _COLORS, 0.0),
    ("Mukena Katun", 210000, _COLORS, 0.0),
    ("Sarung Tenun", 145000, _COLORS, 0.0),
    ("Sandal Jepit", 25000, _SIZES, 0.0),
    ("Sepatu Lari", 450000, _SIZES, 0.0),
    ("Tas Ransel Laptop", 329000, _COLORS, 0.0),
    ("Dompet Kulit", 175000, _COLORS, 0.0),
    ("Payung Lipat", 45000, _COLORS, 0.0),
    ("Kopi Gayo", 59000, _WEIGHTS, 0.9),
    ("Kopi Toraja", 65000, _WEIGHTS, 0.9),
    ("Teh Hijau Celup", 15500, _PACKS, 0.8),
    ("Gula Aren", 12500, _WEIGHTS, 0.9),
    ("Beras Premium", 14500, _WEIGHTS, 0.9),
    ("Madu Hutan", 49000, _WEIGHTS, 0.9),
    ("Kurma Ajwa", 89500, _WEIGHTS, 0.9),
    ("Sambal Bawang", 35000, _PACKS, 0.8),
    ("Keripik Singkong", 9500, _PACKS, 0.8),
    ("Minyak Goreng", 19000, _PACKS, 0.8),
    ("Mie Instan Goreng", 3500, _PACKS, 0.8),
    ("Sabun Cuci Piring", 10000, _PACKS, 0.8),
    ("Sampo Herbal", 27500, _PACKS, 0.8),
    ("Popok Bayi", 89000, _SIZES, 0.05),
    ("Susu UHT", 6500, _PACKS, 0.8),
    ("Headphone Bluetooth", 299000, _MODELS, 0.35),
    ("Powerbank 10000mAh", 185000, _MODELS, 0.2),
    ("Mouse Wireless", 125000, _MODELS, 0.25),
    ("Keyboard Mekanikal", 450000, _MODELS, 0.25),
    ("Lampu LED", 32500, _PACKS, 0.8),
    ("Kipas Angin Meja", 185500, _MODELS, 0.2),
    ("Rice Cooker", 549000, _MODELS, 0.25),
    ("Blender Portable", 249000, _MODELS, 0.2),
    ("Setrika Uap", 275000, _MODELS, 0.2),
    ("Botol Minum", 89000, _COLORS, 0.0),
    ("Tumbler Kopi", 99000, _COLORS, 0.0),
    ("Casing HP", 45000, _COLORS, 0.0),
    ("Kabel Data USB-C", 39000, _MODELS, 0.2),
)

_QTY = (1,) * 60 + (2,) * 22 + (3,) * 9 + (4,) * 4 + (5,) * 3 + (6, 12)
_DISCOUNT_PCT = (5, 10, 10, 15, 20, 25)
_CHUNK = 8192
_CENT = Decimal("0.01")
_NEEDS_QUOTES = re.compile(r'[,"\r\n]').search


def _quote(field: str) -> str:
    """Quote a CSV field the way csv.writer's QUOTE_MINIMAL does."""
    if _NEEDS_QUOTES(field):
        return '"' + field.replace('"', '""') + '"'
    return field


def _weighted(rng: random.Random, pairs: tuple[tuple[str, int], ...], k: int) -> list[str]:
    return rng.choices([p[0] for p in pairs], weights=[p[1] for p in pairs], k=k)


def _products(rng: random.Random) -> list[tuple[str, Decimal]]:
    """200 (name, unit price) pairs: prices mostly multiples of 500, some ending .50."""
    out = []
    for base, price, variants, step in _PRODUCTS:
        for i, variant in enumerate(variants):
            value = price * (1 + step * i)
            value = max(500, round(value / 500.0) * 500)
            unit = Decimal(value)
            if rng.random() < 0.1:
                unit -= Decimal("0.50")
            sep = ", " if rng.random() < 0.05 else " "
            out.append((f"{base}{sep}{variant}", unit))
    return out


def _money(value: Decimal) -> str:
    text = f"{value:.2f}"
    return text[:-3] if text.endswith(".00") else text


def _line_items(rng: random.Random, products: list[tuple[str, Decimal]], n: int) -> list[tuple]:
    """(produk, qty, harga text, diskon text, bruto) combinations, all valid."""
    items = []
    for _ in range(n):
        name, unit = products[rng.randrange(len(products))]
        qty = rng.choice(_QTY)
        bruto = unit * qty
        r = rng.random()
        if r < 0.25:
            diskon = ""
        elif r < 0.6:
            diskon = "0"
        else:
            cut = bruto * rng.choice(_DISCOUNT_PCT) / 100
            diskon = _money(max(Decimal(0), (cut / 500).to_integral_value(rounding="ROUND_FLOOR") * 500))
        items.append((name, str(qty), _money(unit), diskon, bruto))
    return items


def _customers(rng: random.Random, n: int) -> list[tuple[str, str]]:
    """(customer_id, raw kota); about 2% of kota spellings need normalising."""
    kotas = _weighted(rng, KOTA, n)
    out = []
    for i, kota in enumerate(kotas):
        if rng.random() < 0.02:
            kota = rng.choice(
                (kota.lower(), kota.upper(), f"  {kota}", f"{kota} ", kota.replace(" ", "  "),
                 f" {kota.lower()}  ")
            )
        out.append((f"CUST-{100000 + i * 7 + rng.randrange(7):07d}", kota))
    return out


def _timestamps(rng: random.Random, day: date) -> list[str]:
    """One valid order_ts text per second of the day, mostly plain, some other spellings."""
    d = day.isoformat()
    prev = (day - timedelta(days=1)).isoformat()
    out = []
    for h in range(24):
        for m in range(60):
            for s in range(60):
                r = rng.random()
                if r < 0.93:
                    out.append(f"{d} {h:02d}:{m:02d}:{s:02d}")
                elif r < 0.96:
                    out.append(f"{d}T{h:02d}:{m:02d}:{s:02d}")
                elif r < 0.98:
                    out.append(f"{d}T{h:02d}:{m:02d}:{s:02d}+07:00")
                elif r < 0.99:
                    out.append(f"{d} {h:02d}:{m:02d}:{s:02d}.{rng.randrange(1000):03d}")
                elif h >= 7:
                    out.append(f"{d}T{h - 7:02d}:{m:02d}:{s:02d}Z")
                else:
                    # UTC on the previous day, Jakarta on this one
                    out.append(f"{prev}T{h + 17:02d}:{m:02d}:{s:02d}Z")
    return out


def _bad_ts(day: date, pick: Callable[[int], int]) -> str:
    d = day.isoformat()
    hh, mm, ss = pick(24), pick(60), pick(60)
    kind = pick(9)
    if kind == 0:
        return f"{day.day:02d}/{day.month:02d}/{day.year} {hh:02d}:{mm:02d}"
    if kind == 1:
        return f"{day.year}-02-30 {hh:02d}:{mm:02d}:{ss:02d}"  # never a real date
    if kind == 2:
        return f"{day.year}-{day.month:02d}-32 {hh:02d}:{mm:02d}:{ss:02d}"
    if kind == 3:
        return f"{d} 24:{mm:02d}:{ss:02d}"
    if kind == 4:
        return f"{d} {hh:02d}:{mm:02d}"
    if kind == 5:
        return f"{d}T{hh:02d}:{mm:02d}:{ss:02d}+0700"
    return (d, "", "kemarin sore")[kind - 6]


def _wrong_ts(day: date, pick: Callable[[int], int]) -> str:
    hh, mm, ss = pick(24), pick(60), pick(60)
    kind = pick(3)
    if kind == 0:
        other = day + timedelta(days=(-1, 1)[pick(2)])
        return f"{other.isoformat()} {hh:02d}:{mm:02d}:{ss:02d}"
    if kind == 1:
        # a UTC evening of this date is already the next day in Jakarta
        return f"{day.isoformat()}T{17 + hh % 7:02d}:{mm:02d}:{ss:02d}Z"
    # just after midnight at +08:00 is still the previous day in Jakarta
    return f"{day.isoformat()} 00:{mm:02d}:{ss:02d}+08:00"


def _dirty(reason: str, day: date, oid: str, ts: str, customer: tuple[str, str],
           item: tuple, pick: Callable[[int], int]) -> str:
    """One CSV line whose first broken rule is `reason`."""
    cid, kota = customer
    produk, qty, harga, diskon, bruto = item
    fields = [oid, ts, cid, kota, produk, qty, harga, diskon]
    if reason == "missing_order_id":
        fields[0] = ("", "  ")[pick(2)]
    elif reason == "bad_order_ts":
        fields[1] = _bad_ts(day, pick)
    elif reason == "wrong_date":
        fields[1] = _wrong_ts(day, pick)
    elif reason == "missing_kota":
        fields[3] = ("", "   ")[pick(2)]
    elif reason == "bad_qty":
        fields[5] = ("0", "-1", "2.5", "abc", "", "1e3", "+2", "2147483648")[pick(8)]
    elif reason == "bad_price":
        kind = pick(8)
        if kind == 7:  # bruto does not fit NUMERIC(18,2)
            fields[5], fields[6], fields[7] = "500", "99999999999999", ""
        else:
            fields[6] = ("-15000", "12500.505", "Rp10.000", "10,000", "", "abc", "1.5e4")[kind]
    elif reason == "bad_discount":
        kind = pick(6)
        if kind == 4:
            fields[7] = _money(bruto + _CENT)
        elif kind == 5:
            fields[7] = _money(bruto * 2 + 500)
        else:
            fields[7] = ("-5000", "10%", "abc", "1.234")[kind]
    else:  # malformed_row
        kind = pick(3)
        if kind == 0:
            fields.append("catatan")
        elif kind == 1:
            fields.pop()
        else:
            # text after a closing quote: csv with strict=True rejects it on this line
            fields[3] = f'"{kota.strip() or "Bandung"}"x'
            return ",".join(fields[:4] + [_quote(f) for f in fields[4:]]) + "\n"
    return ",".join([_quote(f) for f in fields]) + "\n"


def generate_partition(
    path: Path,
    day: date,
    rows: int,
    *,
    seed: int = 0,
    dirt: float = 0.03,
    duplicates: float = 0.01,
) -> dict:
    """Write `rows` order records for `day` to `path` atomically; return counts per category."""
    if rows < 0 or not 0 <= dirt <= 1 or not 0 <= duplicates <= 1 or dirt + duplicates > 1:
        raise ValueError("rows must be >= 0 and dirt + duplicates within 0..1")
    path = Path(path)
    rng = random.Random(f"tokokita:{seed}:{day.isoformat()}")  # noqa: S311 (test data)
    products = _products(rng)
    items = _line_items(rng, products, 5000)
    item_text = [f"{_quote(p)},{q},{h},{d}\n" for p, q, h, d, _ in items]
    customers = _customers(rng, 20000)
    customer_text = [f"{c},{_quote(k)}," for c, k in customers]
    stamps = _timestamps(rng, day)
    reason_pool = [reason for reason, weight in DIRT_WEIGHTS.items() for _ in range(weight)]
    counts = dict.fromkeys(("fact", "duplicate", *DIRT_WEIGHTS), 0)
    prefix = f"TK-{day:%Y%m%d}-"
    rnd = rng.random
    choices = rng.choices
    dup_limit = dirt + duplicates

    def pick(n: int) -> int:
        return int(rnd() * n)

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        Path(tmp).chmod(0o644)  # mkstemp creates 0600; a partition is an ordinary data file
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(HEADER)
            for start in range(0, rows, _CHUNK):
                stop = min(rows, start + _CHUNK)
                n = stop - start
                draws = [rnd() for _ in range(n)]
                cust = choices(customer_text, k=n)
                item = choices(item_text, k=n)
                # every row valid first, then the few dirty and duplicate rows are rewritten
                lines = [
                    f"{prefix}{i + 1:08d},{stamps[i * 86400 // rows]},{c}{t}"
                    for i, c, t in zip(range(start, stop), cust, item, strict=True)
                ]
                for j in [j for j, r in enumerate(draws) if r < dup_limit]:
                    i = start + j
                    if draws[j] < dirt:
                        reason = reason_pool[pick(len(reason_pool))]
                        counts[reason] += 1
                        lines[j] = _dirty(
                            reason, day, f"{prefix}{i + 1:08d}", stamps[i * 86400 // rows],
                            customers[pick(len(customers))], items[pick(len(items))], pick,
                        )
                        continue
                    # a later, different copy of an earlier valid order of this chunk:
                    # the earlier one becomes the duplicate (last wins)
                    for _ in range(8 if j else 0):
                        k = pick(j)
                        if draws[k] >= dup_limit:
                            counts["duplicate"] += 1
                            lines[j] = (
                                f"{prefix}{start + k + 1:08d},{stamps[i * 86400 // rows]},"
                                f"{customer_text[pick(len(customer_text))]}"
                                f"{item_text[pick(len(item_text))]}"
                            )
                            break
                f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    counts["fact"] = rows - sum(counts.values())
    return {"rows": rows, **counts}


def main(argv: list[str] | None = None) -> int:
    """Command line: write data/raw/pesanan_<date>.csv with generated orders."""
    parser = argparse.ArgumentParser(prog="python -m devtools.samples", description=__doc__)
    parser.add_argument("--date", required=True, type=date.fromisoformat)
    parser.add_argument("--rows", required=True, type=int)
    parser.add_argument("--out", type=Path, default=Path("data/raw"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dirt", type=float, default=0.03)
    parser.add_argument("--duplicates", type=float, default=0.01)
    args = parser.parse_args(argv)
    target = args.out / f"pesanan_{args.date.isoformat()}.csv"
    counts = generate_partition(
        target, args.date, args.rows, seed=args.seed, dirt=args.dirt, duplicates=args.duplicates
    )
    try:
        json.dump({"file": str(target), **counts}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        sys.stdout.flush()  # a closed pipe raises here, inside the try, not at exit
    except BrokenPipeError:
        # the Python docs' recipe (signal, "Note on SIGPIPE"): the reader (`| head`) has gone,
        # so the flush at exit goes to devnull instead of raising again; the file is written,
        # so this is no failure (exit 0, as the command line's own commands do)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

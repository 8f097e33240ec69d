"""Names fixed by the data contract: file names, columns, reason codes, staging file names."""

from __future__ import annotations

from datetime import date

from tokokita_etl.settings.layout import join
from tokokita_etl.storage import Location


def raw_file_name(day: date) -> str:
    """The raw partition file of `day`: `pesanan_YYYY-MM-DD.csv`."""
    return f"pesanan_{day.isoformat()}.csv"


def gold_file_name(day: date) -> str:
    """The gold file of `day`: `summary_harian_YYYY-MM-DD.csv`."""
    return f"summary_harian_{day.isoformat()}.csv"


def partition_path(raw_dir: Location, day: date) -> Location:
    """`<raw_dir>/pesanan_YYYY-MM-DD.csv`."""
    return join(raw_dir, raw_file_name(day))


def gold_path(gold_dir: Location, day: date) -> Location:
    """`<gold_dir>/summary_harian_YYYY-MM-DD.csv`."""
    return join(gold_dir, gold_file_name(day))


def quarantine_path(quarantine_dir: Location, day: date) -> Location:
    """`<quarantine_dir>/karantina_YYYY-MM-DD.csv`."""
    return join(quarantine_dir, f"karantina_{day.isoformat()}.csv")


REQUIRED_COLUMNS = (
    "order_id", "order_ts", "customer_id", "kota", "produk", "qty", "harga_satuan", "diskon",
)

# reason codes of quarantined rows
MALFORMED = "malformed_row"
MISSING_ORDER_ID = "missing_order_id"
BAD_ORDER_TS = "bad_order_ts"
WRONG_DATE = "wrong_date"
MISSING_KOTA = "missing_kota"
BAD_QTY = "bad_qty"
BAD_PRICE = "bad_price"
BAD_DISCOUNT = "bad_discount"
#: the row rules' reasons, in the order the rules are checked
ROW_REASONS = (
    MISSING_ORDER_ID, BAD_ORDER_TS, WRONG_DATE, MISSING_KOTA, BAD_QTY, BAD_PRICE, BAD_DISCOUNT,
)
DUPLICATE = "duplicate"
OTHER_PARTITION = "order_id_in_other_partition"
ALL_REASONS = (MALFORMED, *ROW_REASONS, DUPLICATE, OTHER_PARTITION)

FACT_COLUMNS = (
    "order_id", "order_date", "order_ts", "customer_id", "kota", "produk", "qty",
    "harga_satuan", "diskon", "bruto", "bersih",
)
SUMMARY_COLUMNS = ("order_date", "kota", "jumlah_pesanan", "total_qty", "bruto", "bersih")
QUARANTINE_COLUMNS = ("order_date", "line", "reason", *REQUIRED_COLUMNS, "raw")

# staging files written by one stage and read by the next (in another process)
EXTRACT_ROWS = "extract.parquet"
EXTRACT_MALFORMED = "malformed.parquet"
VALID_ROWS = "valid.parquet"
#: valid.parquet's columns whose values repeat: written with a Parquet dictionary (order_id,
#: order_ts, customer_id and line overflowed theirs, after the attempt had cost its time) and
#: read back as Arrow dictionaries where load turns them into Python values
REPEATING_VALID_COLUMNS = ("order_date", "kota", "produk", "qty", "harga_satuan", "diskon",
                           "bruto", "bersih")
REJECTED_ROWS = "rejected.parquet"

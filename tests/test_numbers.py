"""The "Numbers to know" page: every figure comes from data/ or a cited datasheet (inferbook.numbers)."""
from __future__ import annotations

import re
from pathlib import Path

import yaml

from inferbook.numbers import datasheet_rows, substitutions
from inferbook.prose import NUMBER, strip

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "book" / "numbers.md"
# The sizes the page's arithmetic is done for: a stated assumption, not a result.
ASSUMED = ["14 GB", "140 GB", "16 bits", "seven billion", "seventy billion"]


def test_every_substitution_on_the_page_is_filled_from_data():
    keys = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", PAGE.read_text()))
    values = substitutions(ROOT)
    assert keys and not keys - set(values), f"no value for {sorted(keys - set(values))}"
    assert all(values[k].strip() for k in keys)


def test_the_page_types_no_number_itself():
    text = strip(re.sub(r"\{\{\s*\w+\s*\}\}", " ", PAGE.read_text()))
    for phrase in ASSUMED:
        text = text.replace(phrase, " ")
    typed = [text[max(0, m.start() - 30):m.end() + 10] for m in NUMBER.finditer(text)]
    assert not typed, typed


def test_every_datasheet_figure_is_cited():
    bib = (ROOT / "book" / "references.bib").read_text()
    for row in yaml.safe_load((ROOT / "data" / "datasheets.yml").read_text()):
        assert f"{{{row['cite']},\n" in bib, f"{row['part']}: no BibTeX entry {row['cite']}"
        entry = bib.split(f"{{{row['cite']},")[1].split("\n}")[0]
        bandwidth = row["bandwidth_gb_s"]
        assert f"{bandwidth:,} GB/s" in entry or f"{bandwidth / 1000:g} TB/s" in entry, \
            f"{row['part']}: {bandwidth} GB/s is not what {row['cite']} records"
        assert "url" in entry


def test_decode_bound_arithmetic():
    rows = datasheet_rows([{"part": "NVIDIA X1", "cite": "x", "memory_gb": 80, "memory_kind": "HBM",
                            "bandwidth_gb_s": 2000, "dense_16bit_tflops": 400, "16bit_format": "bfloat16"}],
                          weights_gb=(14.0,))
    assert rows["x1_bound_14gb"] == "7.0 ms"     # 14 GB / 2000 GB/s
    assert rows["x1_ridge"] == "200"              # 400e12 / 2000e9 FLOP per byte
    assert rows["x1_bandwidth"] == "2,000 GB/s"

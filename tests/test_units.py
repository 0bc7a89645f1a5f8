import pytest

from scidmz.units import format_rate, format_time, parse_rate, parse_size, parse_time


@pytest.mark.parametrize(
    "text,expected",
    [("600M", 600e6), ("1G", 1e9), ("100Mbit", 100e6), ("100Mbps", 100e6), ("1.5e3", 1500.0),
     (750, 750.0), ("10kbit/s", 10e3), ("75MB/s", 600e6), ("2.5 G", 2.5e9)],
)
def test_parse_rate(text, expected):
    assert parse_rate(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text,expected",
    [("10ms", 0.01), ("1.5s", 1.5), ("100us", 1e-4), ("2min", 120.0), (3, 3.0), ("250ns", 2.5e-7)],
)
def test_parse_time(text, expected):
    assert parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize(
    "text,expected",
    [("10GB", 10e9), ("100kB", 100e3), ("1MiB", 2**20), ("12500000", 12.5e6), ("1.5KiB", 1536)],
)
def test_parse_size(text, expected):
    assert parse_size(text) == pytest.approx(expected)


@pytest.mark.parametrize("bad", ["fast", "10 parsecs", "-5M", "", "M600", True])
def test_parse_rate_rejects_with_one_line(bad):
    with pytest.raises(ValueError) as exc:
        parse_rate(bad, what="--target")
    msg = str(exc.value)
    assert "--target" in msg and "\n" not in msg


def test_parse_time_rejects_unknown_unit():
    with pytest.raises(ValueError, match="unknown time unit"):
        parse_time("10 fortnights")


def test_format_roundtrip_readable():
    assert format_rate(600e6) == "600.0 Mbit/s"
    assert format_rate(1.2e9) == "1.2 Gbit/s"
    assert format_time(0.0123) == "12.3 ms"
    assert format_time(2.0) == "2.00 s"

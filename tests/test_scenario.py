import pytest

from scidmz.scenario import Scenario, builtin_names, load_scenario


def test_builtins_present_and_paper_values():
    names = builtin_names()
    for n in ("paper-cubic", "paper-bbr2", "paper-bbr", "small-cubic", "small-bbr2", "testbed"):
        assert n in names
    s = load_scenario("paper-cubic")
    assert s.capacity == 1e9
    assert s.campus.hosts == 100 and s.campus.rtt == pytest.approx(0.010)
    assert s.dtn.streams == 8 and s.dtn.rtt == pytest.approx(0.100)
    # Default buffer: the shallow regime, 0.05 BDP of the DTN path (1 Gbit/s x 100 ms x 0.05);
    # the deep variant keeps 1 BDP = 12.5 MB.
    assert s.buffer_bytes == pytest.approx(625e3)
    assert load_scenario("paper-cubic-deep").buffer_bytes == pytest.approx(12.5e6)
    assert load_scenario("paper-bbr2").dtn.cca == "bbr2"
    assert load_scenario("paper-bbr").dtn.cca == "bbr"


def test_toml_file_and_unknown_key(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text('[link]\ncapacity = "100M"\nbuffer = "1MB"\n[dtn]\ncca = "reno"\n')
    s = load_scenario(p)
    assert s.name == "mine" and s.capacity == 100e6 and s.buffer_bytes == 1e6 and s.dtn.cca == "reno"
    p.write_text('[link]\ncapacty = "100M"\n')
    with pytest.raises(ValueError, match="unknown scenario key 'link.capacty'"):
        load_scenario(p)


@pytest.mark.parametrize(
    "override,needle",
    [
        ("link.capacity=-1G", "link.capacity"),
        ("dtn.cca=vegas", "dtn.cca"),
        ("campus.traffic=video", "campus.traffic"),
        ("shaper.rate=2G", "shaper.rate"),
        ("campus.hosts=2.5", "campus.hosts"),
        ("nosuch.key=1", "nosuch"),
        ("duration=0.1", "duration"),
        # a bottleneck buffer below one MTU or above 10 BDP of the DTN path
        ("link.buffer=100", "link.buffer gives a bottleneck buffer of 100 bytes, below one MTU"),
        ("link.buffer_bdp=0.0001", "link.buffer_bdp gives a bottleneck buffer of"),
        ("link.buffer_bdp=20", "link.buffer_bdp gives 20 BDP"),
        ("link.buffer=1GB", "link.buffer gives 800 BDP"),
        ("link.burst=-1k", "link.burst: must not be negative"),
        ("link.burst=1TB", "link.burst must be at most"),
        ("link.arrival_idc=-1", "link.arrival_idc must be >= 0"),
    ],
)
def test_bad_values_name_the_key(override, needle):
    with pytest.raises(ValueError) as exc:
        load_scenario("small-cubic").with_overrides([override])
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_target_checks_and_trivial_rate():
    s = load_scenario("paper-cubic")
    assert s.check_target(600e6) == 600e6
    with pytest.raises(ValueError, match="above the bottleneck capacity"):
        s.check_target(1.2e9)
    with pytest.raises(ValueError, match="non-negative"):
        s.check_target(-1.0)
    with pytest.raises(ValueError, match="non-negative"):
        s.check_target(float("nan"))
    assert s.trivial_rate(600e6) == pytest.approx(400e6)
    assert s.trivial_rate(0.0) == pytest.approx(1e9)


def test_link_burst_default_is_one_ms_of_b_max():
    assert load_scenario("testbed").link_burst_bytes == pytest.approx(12_500)  # 1 ms of 100 Mbit/s
    assert load_scenario("testbed").replace(link={"capacity": 1e6, "buffer_bdp": 1.0}).link_burst_bytes == 2 * 1514
    assert load_scenario("testbed").with_overrides(["link.burst=0"]).link_burst_bytes == 0.0


def test_dict_roundtrip_and_replace():
    s = load_scenario("paper-bbr2")
    assert Scenario.from_dict(s.to_dict()) == s
    r = s.replace(dtn={"cca": "cubic", "transfer": 10e9}, duration=30.0)
    assert r.dtn.cca == "cubic" and r.dtn.transfer == 10e9 and r.duration == 30.0
    assert r.steps == 30
    assert s.dtn.cca == "bbr2"  # the original is untouched (frozen)


def test_unknown_builtin_lists_choices():
    with pytest.raises(ValueError, match="built-ins: .*paper-cubic"):
        load_scenario("paper-cubik")


def test_invalid_toml(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text("[link\ncapacity=")
    with pytest.raises(ValueError, match="invalid TOML"):
        load_scenario(p)

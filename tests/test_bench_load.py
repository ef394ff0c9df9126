"""inferlab.bench.load: the machine's busy time and other processes' share of it (Chapter 7)."""
import os

import pytest

from inferlab.bench.load import OTHERS_MAX, machine_busy_seconds, others_load, own_cpu_seconds


def test_busy_seconds_count_user_nice_system_irq_softirq_and_steal_not_idle_or_iowait(tmp_path):
    stat = tmp_path / "stat"
    tick = os.sysconf("SC_CLK_TCK")
    #                user nice system idle iowait irq softirq steal guest guest_nice
    stat.write_text(f"cpu  {tick} {2 * tick} {3 * tick} 999999 888888 {4 * tick} {5 * tick} {6 * tick} 0 0\n"
                    "cpu0 1 1 1 1 1 1 1 1 0 0\n")
    assert machine_busy_seconds(stat) == pytest.approx(1 + 2 + 3 + 4 + 5 + 6)


def test_busy_seconds_are_none_where_the_file_is_missing_or_not_procs(tmp_path):
    assert machine_busy_seconds(tmp_path / "absent") is None
    (tmp_path / "other").write_text("intr 1 2 3\n")
    assert machine_busy_seconds(tmp_path / "other") is None


def test_busy_seconds_on_this_machine_grow():
    first = machine_busy_seconds()
    if first is None:
        pytest.skip("no /proc/stat here")
    sum(i * i for i in range(300_000))
    assert machine_busy_seconds() >= first


def test_others_load_subtracts_this_process_own_time():
    """With a counter that charges exactly this process's time, the others used nothing."""
    start_own = own_cpu_seconds()
    result = {}
    with others_load(result, busy=lambda: own_cpu_seconds() - start_own + 100.0):
        sum(i * i for i in range(300_000))
    assert result["cpus"] == pytest.approx(0.0, abs=1e-6)


def test_others_load_reports_what_others_added_per_second_of_wall_time():
    ticks = iter([10.0, 10.0 + 5.0])  # the machine's busy seconds before and after

    result = {}
    with others_load(result, busy=lambda: next(ticks)) as inside:
        assert inside is result
    assert result["cpus"] > 5.0 / 1.0  # five busy seconds over a block far shorter than a second
    assert OTHERS_MAX < 1


def test_others_load_is_none_where_the_machine_cannot_be_read():
    result = {}
    with others_load(result, busy=lambda: None):
        pass
    assert result["cpus"] is None

"""The delay stage's arrival time (plant/netns/stages/delay.py, ``arrival``): a kernel stamp older
than the last time the stage found its socket empty is not the frame's arrival (ACKs can carry
their sender's old delivery time across the veths) and must not shorten the hold."""

from __future__ import annotations

from scidmz.plant.netns.stages.delay import arrival


def test_a_stamp_older_than_the_last_empty_socket_counts_from_then() -> None:
    # measured: stamps 300 ms old although the stage had drained its socket 1 ms before
    assert arrival(stamp=10.0, drained=10.299, now=10.300) == 10.299


def test_a_plausible_stamp_is_kept_and_none_is_now() -> None:
    # descheduled stage: the frame waited 40 ms in the socket and the kernel's stamp says so
    assert arrival(stamp=10.260, drained=10.200, now=10.300) == 10.260
    assert arrival(stamp=10.500, drained=10.200, now=10.300) == 10.300  # never in the future
    assert arrival(stamp=None, drained=10.200, now=10.300) == 10.300

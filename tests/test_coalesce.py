"""Streamed deltas are joined per interval; the first one and the last ones are never held back."""

from __future__ import annotations

from app.chat.coalesce import Coalescer


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_first_delta_goes_out_at_once_and_fast_ones_are_joined():
    clock, sent = Clock(), []

    async def send(text: str) -> None:
        sent.append(text)

    batcher = Coalescer(send, 0.030, clock)
    await batcher.add("a")
    assert sent == ["a"]
    for piece, at in (("b", 0.010), ("c", 0.020), ("d", 0.031), ("e", 0.040)):
        clock.now = at
        await batcher.add(piece)
    assert sent == ["a", "bcd"]
    await batcher.flush()
    assert sent == ["a", "bcd", "e"] and "".join(sent) == "abcde" and batcher.sends == 3


async def test_slow_streams_send_every_delta_and_zero_interval_disables_joining():
    clock, sent = Clock(), []

    async def send(text: str) -> None:
        sent.append(text)

    batcher = Coalescer(send, 0.0, clock)
    for piece in "xyz":
        await batcher.add(piece)
    assert sent == ["x", "y", "z"]
    slow = Coalescer(send, 0.030, clock)
    for index, piece in enumerate("uvw"):
        clock.now = 1 + index * 0.1
        await slow.add(piece)
    assert sent[3:] == ["u", "v", "w"]
    await slow.flush()
    assert len(sent) == 6


async def test_a_slow_update_holds_the_next_one_for_an_interval_after_it_ends():
    clock, sent = Clock(), []

    async def send(text: str) -> None:  # the page's update takes 40 ms, as on a busy event loop
        sent.append(text)
        clock.now += 0.040

    batcher = Coalescer(send, 0.030, clock)
    for index in range(40):  # a delta every 8 ms for about 320 ms, while updates take longer than the interval
        clock.now = max(clock.now, index * 0.008)
        await batcher.add(f"{index} ")
    await batcher.flush()
    assert "".join(sent) == "".join(f"{index} " for index in range(40))
    assert len(sent) <= 0.32 / (0.040 + 0.030) + 2, sent  # not one update per delta

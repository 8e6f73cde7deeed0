"""state_dict / load_state_dict: a mid-epoch checkpoint resumes the rest of the epoch byte
for byte (random order and random crops and flips included) after a pickle or JSON round
trip, in a fresh Loader; a checkpoint between epochs starts the next epoch; misfits raise."""

import json
import pickle

import pytest

from conftest import fixture
from resume_support import assert_same, copies, jpeg_loader
from ffcv_rs import ConfigError
from ffcv_rs.fields.decoders import IntDecoder
from ffcv_rs.loader import Loader, OrderOption


@pytest.mark.parametrize("stop", [0, 1, 4])
@pytest.mark.parametrize("roundtrip", ["pickle", "json"])
def test_mid_epoch_state_resumes_the_rest_of_the_epoch_exactly(stop, roundtrip):
    whole = copies(jpeg_loader())
    assert len(whole) > stop + 1

    first = jpeg_loader()
    it = iter(first)
    taken = copies(next(it) for _ in range(stop))
    state = first.state_dict()
    del it
    state = pickle.loads(pickle.dumps(state)) if roundtrip == "pickle" \
        else json.loads(json.dumps(state))

    # Another process would build the same Loader; num_workers and the cache may differ.
    second = jpeg_loader(num_workers=1, os_cache=False)
    second.load_state_dict(state)
    rest = copies(second)
    assert_same(taken + rest, whole)


def test_state_between_epochs_starts_the_next_epoch():
    loader = jpeg_loader()
    list(loader)
    state = loader.state_dict()
    assert state["state"]["epoch"] == 1
    want = copies(loader)  # epoch 1 of the uninterrupted loader
    fresh = jpeg_loader()
    fresh.load_state_dict(state)
    assert_same(copies(fresh), want)


def test_a_state_that_does_not_fit_raises():
    loader = jpeg_loader()
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    del it
    with pytest.raises(ConfigError, match="batch size 3"):
        jpeg_loader(batch_size=4).load_state_dict(state)
    with pytest.raises(ConfigError, match="another file"):
        Loader(fixture("scalars"), batch_size=3, order=OrderOption.RANDOM, seed=11,
               drop_last=False).load_state_dict(state)
    broken = {"ffcv_rs_loader_state": 1, "state": {"format_version": 1}}
    with pytest.raises(ConfigError, match="loader state"):
        jpeg_loader().load_state_dict(broken)
    with pytest.raises(ValueError, match="not an ffcv_rs loader state"):
        jpeg_loader().load_state_dict({"epoch": 3})
    with pytest.raises(TypeError):
        jpeg_loader().load_state_dict("not a dict")


def test_a_loader_without_a_seed_takes_the_states_and_one_with_another_seed_refuses_it():
    # A restarted job builds its Loader without a seed again and draws a new one; its own
    # checkpoint must still resume (the state's seed wins over a drawn one).
    first = jpeg_loader(seed=None)
    it = iter(first)
    taken = copies(next(it) for _ in range(2))
    state = first.state_dict()
    del it
    seed = first.seed
    again = jpeg_loader(seed=None)
    again.load_state_dict(state)
    assert again.seed == seed
    assert_same(taken + copies(again), copies(jpeg_loader(seed=seed)))
    # A seed given to the constructor is the user's: another one is refused.
    with pytest.raises(ConfigError, match="seed"):
        jpeg_loader(seed=seed + 1).load_state_dict(state)


def test_a_restarted_distributed_job_resumes_though_its_ranks_agree_on_a_new_seed(monkeypatch):
    # torchrun gives each launch a new run id, from which the ranks derive their seed when
    # none is given (no torch.distributed here): the restart's seed differs from the
    # checkpoint's, and the checkpoint must win.
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")

    def rank_loader():
        return Loader(fixture("scalars"), batch_size=10, order=OrderOption.RANDOM,
                      distributed=True, drop_last=False,
                      pipelines={"index": [IntDecoder()], "value": None})

    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "launch-1")
    first = rank_loader()
    it = iter(first)
    (index,) = next(it)
    taken = index[:, 0].tolist()
    state = first.state_dict()
    del it, index
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "launch-2")
    second = rank_loader()
    assert second.seed != first.seed  # the restart agreed on another seed...
    second.load_state_dict(state)
    assert second.seed == first.seed  # ...and took the checkpoint's
    rest = [i for (index,) in second for i in index[:, 0].tolist()]
    assert taken + rest == first.order_of(0)

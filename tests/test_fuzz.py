"""Mutation fuzzing: every mutated model compiles and runs (matching onnxruntime where
onnxruntime takes it) or ends in an aotc.AotcError; never another exception, a crash or
a hang. Seeded and bounded: AOTC_FUZZ_SECONDS (default 60) and AOTC_FUZZ_SEED (default
0) choose a longer or different run; `python tests/fuzzing.py --seconds N` runs it alone."""
import os
from collections import Counter

import pytest

import fuzzing

SECONDS = float(os.environ.get("AOTC_FUZZ_SECONDS", "60"))
SEED = int(os.environ.get("AOTC_FUZZ_SEED", "0"))


def test_cases_are_reproducible_and_use_every_mutation():
    assert fuzzing.make_case(1234) == fuzzing.make_case(1234)
    assert fuzzing.make_case(1234) != fuzzing.make_case(1235)
    used = Counter(name for seed in range(400) for name in fuzzing.make_case(seed)[1])
    every = {m.__name__ for m in fuzzing.PROTO_MUTATIONS + fuzzing.BYTE_MUTATIONS}
    assert set(used) == every


def test_every_seed_model_matches_onnxruntime(tmp_path, monkeypatch):
    monkeypatch.setenv("AOTC_CACHE_DIR", str(tmp_path))
    for model in fuzzing.seed_models():
        result = fuzzing.run_case(model.SerializeToString(), 0, lambda msg: None)
        assert result == {"outcome": "ok", "detail": ""}


@pytest.mark.parametrize("selftest, outcome", [("crash", "crash"), ("hang", "hang")])
def test_the_worker_reports_crashes_and_hangs(selftest, outcome, tmp_path):
    worker = fuzzing.Worker(str(tmp_path))
    try:
        data = fuzzing.seed_models()[0].SerializeToString()
        assert worker.run(data, 0, timeout=60 if selftest == "crash" else 3, selftest=selftest)["outcome"] == outcome
        assert worker.run(b"\x08", 0, timeout=60)["outcome"] == "InvalidModel"   # a fresh worker took over
    finally:
        worker.stop()


def test_fuzzed_models_end_in_success_or_an_aotc_error(tmp_path):
    outcomes, failures = fuzzing.fuzz(SECONDS, SEED, save_dir=str(tmp_path))
    total = sum(outcomes.values())
    print(f"\nfuzz: {total} cases in {SECONDS:.0f} s (seed {SEED}): {dict(outcomes.most_common())}")
    assert total >= 10, "too few cases ran to mean anything"
    assert outcomes["ok"] > 0 and outcomes["InvalidModel"] > 0
    assert failures == [], "\n".join(f"seed {f['seed']} {f['mutations']}: {f['outcome']}: {f['detail'][-600:]}"
                                     for f in failures)

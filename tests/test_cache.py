"""Cached evaluation sets: deterministic, verified on load, regenerated loudly when stale or corrupt."""

import hashlib
import json
import warnings

import numpy as np
import pytest

from pipeline.data.cache import (
    EVAL_SET_SIZE,
    GENERATOR_VERSION,
    CacheWarning,
    build_eval_set,
    eval_seed,
    generate_eval_sets,
    load_eval_set,
    read_eval_set,
    set_paths,
)
from pipeline.tasks import LENGTH_DISTRIBUTIONS, PAPER_TASK_NAMES, SPLITS, get_task, has_length_choice


@pytest.fixture(scope="module")
def full_cache(cache_dir):
    """Every set of the paper's tasks (the default), in the session's shared cache: generated here where no other test
    has generated it yet, verified on load where one has (both paths fill the cache with the same sets; the tests
    below only read them, and generation itself is tested on private folders)."""
    labels = []
    sets = generate_eval_sets(cache_dir=cache_dir, progress=labels.append)
    return cache_dir, sets, labels


def test_generate_fills_every_set_with_the_papers_sizes(full_cache):
    cache_dir, sets, labels = full_cache
    expected = []
    for t in PAPER_TASK_NAMES:
        readings = [f" ({r} lengths)" for r in LENGTH_DISTRIBUTIONS] if has_length_choice(t) else [""]
        expected += [f"{t}/{s}{r}" for r in readings for s in SPLITS]
    assert labels == expected
    for eval_set in sets:
        task = get_task(eval_set.task, eval_set.length_distribution)
        low, high = task.window(eval_set.split)
        assert len(eval_set) == EVAL_SET_SIZE == 1000
        assert all(low <= len(p.source) <= high for p in eval_set.pairs)
        assert (eval_set.source_vocab, eval_set.target_vocab) == (task.source_vocab, task.target_vocab)
        assert eval_set.seed == eval_seed(eval_set.task, eval_set.split)
    assert sorted(p.name for p in (cache_dir / "copy").iterdir()) == [
        "long.json", "long.manifest.json", "test.json", "test.manifest.json", "train.json", "train.manifest.json"]
    # A task with a length choice keeps one family of sets per reading, each under its own fingerprint.
    assert sorted(p.name for p in (cache_dir / "svo_sov").iterdir()) == ["grammar-lengths", "uniform-lengths"]
    fingerprints = {json.loads(set_paths("svo_sov", "test", cache_dir, r)[1].read_text())["task_fingerprint"]
                    for r in LENGTH_DISTRIBUTIONS}
    assert len(fingerprints) == 2


def test_loading_a_valid_cache_is_silent_and_returns_the_generated_data(full_cache):
    cache_dir, sets, _ = full_cache
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for eval_set in sets:
            assert load_eval_set(eval_set.task, eval_set.split, cache_dir, eval_set.length_distribution) == eval_set


def test_seeds_are_the_documented_ones_and_sets_are_reproducible():
    assert [eval_seed(t, "train") for t in PAPER_TASK_NAMES] == [1001, 2001, 3001, 4001, 5001]
    assert (eval_seed("gender", "test"), eval_seed("gender", "long")) == (5002, 5003)
    expected = get_task("svo_sov").sample_batch(np.random.default_rng(4001), "train", EVAL_SET_SIZE)
    assert list(build_eval_set("svo_sov", "train").pairs) == expected


def test_the_same_files_on_every_generation(tmp_path):
    generate_eval_sets(["reversal"], ["train"], cache_dir=tmp_path / "a")
    generate_eval_sets(["reversal"], ["train"], cache_dir=tmp_path / "b")
    for a, b in zip(set_paths("reversal", "train", tmp_path / "a"), set_paths("reversal", "train", tmp_path / "b")):
        assert a.read_bytes() == b.read_bytes()
    assert not list((tmp_path / "a" / "reversal").glob(".*"))  # no temporary files left behind


def test_manifest_records_what_made_the_set(tmp_path):
    generate_eval_sets(["copy"], ["test"], cache_dir=tmp_path)
    data_path, manifest_path = set_paths("copy", "test", tmp_path)
    manifest = json.loads(manifest_path.read_text())
    assert {k: manifest[k] for k in ("task", "split", "seed", "size", "generator_version", "data_file")} == {
        "task": "copy", "split": "test", "seed": 1002, "size": 1000, "generator_version": GENERATOR_VERSION,
        "data_file": "test.json"}
    assert manifest["task_fingerprint"] == get_task("copy").fingerprint()
    content = json.loads(data_path.read_text())
    assert content["source_vocab"] == list(get_task("copy").source_vocab) and len(content["pairs"]) == 1000


def corrupt_byte(path):
    data = bytearray(path.read_bytes())
    position = data.index(b"[[") + 2  # first token id of the first pair
    data[position] = ord("9") if data[position] != ord("9") else ord("8")
    path.write_bytes(bytes(data))


def truncate(path):
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def edit_manifest(key, value):
    def edit(path):
        manifest_path = path.with_name(path.stem + ".manifest.json")
        manifest = json.loads(manifest_path.read_text())
        manifest[key] = value
        manifest_path.write_text(json.dumps(manifest))
    return edit


def garble_manifest(path):
    path.with_name(path.stem + ".manifest.json").write_text("{not json")


def remove_data(path):
    path.unlink()


@pytest.mark.parametrize("damage, message", [
    (corrupt_byte, r"corrupt: checksum of .*train\.json does not match"),
    (truncate, r"corrupt: checksum"),
    (edit_manifest("generator_version", "0"), r"stale: .* generator_version='0', the current code makes '1'"),
    (edit_manifest("task_fingerprint", "copy:old"), r"stale: .* task_fingerprint='copy:old'"),
    (edit_manifest("seed", 7), r"stale: .* seed=7, the current code makes 1001"),
    (edit_manifest("source_lengths", [1, 40]), r"stale: .* source_lengths=\[1, 40\], the current code makes \[8, 64\]"),
    (garble_manifest, r"manifest .* is unreadable"),
    (remove_data, r"data file .* is unreadable"),
])
def test_damaged_or_stale_sets_are_detected_and_regenerated_with_a_warning(tmp_path, damage, message):
    good = generate_eval_sets(["copy"], ["train"], cache_dir=tmp_path)[0]
    data_path, _ = set_paths("copy", "train", tmp_path)
    damage(data_path)
    with pytest.raises(ValueError, match=message):
        read_eval_set("copy", "train", tmp_path)
    with pytest.warns(CacheWarning, match=message):
        assert load_eval_set("copy", "train", tmp_path) == good
    assert read_eval_set("copy", "train", tmp_path) == good  # the regenerated files verify again


def test_corruption_that_keeps_the_checksum_consistent_is_still_caught(tmp_path):
    """Someone edits the data and updates the checksum: the content check (lengths, vocabularies) still fires."""
    generate_eval_sets(["copy"], ["train"], cache_dir=tmp_path)
    data_path, manifest_path = set_paths("copy", "train", tmp_path)
    content = json.loads(data_path.read_text())
    content["pairs"][0][0] = [0] * 3  # a source shorter than the window
    data_path.write_text(json.dumps(content))
    manifest = json.loads(manifest_path.read_text())
    manifest["sha256"] = hashlib.sha256(data_path.read_bytes()).hexdigest()
    manifest_path.write_text(json.dumps(manifest))
    with pytest.warns(CacheWarning, match=r"does not hold 1000 pairs of source length 8\.\.64"):
        load_eval_set("copy", "train", tmp_path)


def test_a_missing_set_is_generated_with_a_warning(tmp_path):
    with pytest.warns(CacheWarning, match=r"regenerating eval set bigram_flip/long .*: missing"):
        eval_set = load_eval_set("bigram_flip", "long", tmp_path)
    assert len(eval_set) == 1000 and all(len(p.source) % 2 == 0 for p in eval_set.pairs)
    with pytest.raises(FileNotFoundError):
        read_eval_set("bigram_flip", "test", tmp_path)


def test_generate_rewrites_only_what_is_invalid(tmp_path):
    generate_eval_sets(["copy"], cache_dir=tmp_path)
    train_path, _ = set_paths("copy", "train", tmp_path)
    test_path, _ = set_paths("copy", "test", tmp_path)
    truncate(test_path)
    before = train_path.stat().st_mtime_ns
    with pytest.warns(CacheWarning, match=r"copy/test"):
        generate_eval_sets(["copy"], cache_dir=tmp_path)
    assert train_path.stat().st_mtime_ns == before
    read_eval_set("copy", "test", tmp_path)


def test_bad_names_fail_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"unknown task 'gendre'; choose from: copy, reversal"):
        generate_eval_sets(["copy", "gendre"], cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"unknown split 'dev'; choose from: train, test, long"):
        generate_eval_sets(["copy"], ["train", "dev"], cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"unknown split 'dev'"):
        load_eval_set("copy", "dev", tmp_path)
    assert not (tmp_path / "copy").exists()

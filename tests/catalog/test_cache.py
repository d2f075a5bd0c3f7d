"""The catalog kept validated between runs (catalog/cache.py): the same entries as the YAML files
give, rebuilt when anything they come from changes, and never trusted when it is cut short."""

import pickle
from pathlib import Path

import pytest

from gpucluster.catalog import cache
from gpucluster.catalog.registry import DATA_DIR, Catalog


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "pycache")
    monkeypatch.delenv("GPUCLUSTER_NO_CACHE", raising=False)
    return tmp_path / "pycache"


def test_cached_entries_equal_the_files(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = Catalog(DATA_DIR).gpus                        # built from the files, then stored
    assert len(list(cache_dir.glob("catalog-gpus-*.pickle"))) == 1
    again = Catalog(DATA_DIR).gpus                        # read back
    assert again is not first
    assert again.names() == first.names()
    for name in first.names():
        assert again.get(name) == first.get(name)
        assert again.get(name).model_dump() == first.get(name).model_dump()
    monkeypatch.setenv("GPUCLUSTER_NO_CACHE", "1")
    assert Catalog(DATA_DIR).gpus.get("H100").model_dump() == first.get("H100").model_dump()


def test_the_key_follows_the_files_and_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "a.yaml"
    data.write_text("x: 1\n")
    before = cache.key("links", [data])
    data.write_text("x: 22\n")
    assert cache.key("links", [data]) != before           # size (and time) changed
    assert cache.key("nics", [data]) != cache.key("links", [data])
    code = tmp_path / "models.py"
    code.write_text("")
    monkeypatch.setattr(cache, "CODE", [code])
    k = cache.key("links", [data])
    code.write_text("# a new field\n")
    assert cache.key("links", [data]) != k


def test_a_damaged_file_is_rebuilt_and_old_ones_removed(cache_dir: Path) -> None:
    files = [DATA_DIR / "links.yaml"]
    calls = []

    def build() -> dict:
        calls.append(1)
        return {"n": len(calls)}

    assert cache.cached("links", files, build) == {"n": 1}
    assert cache.cached("links", files, build) == {"n": 1} and len(calls) == 1
    (path,) = cache_dir.glob("catalog-links-*.pickle")
    path.write_bytes(pickle.dumps({"n": 1})[:5])           # cut short
    assert cache.cached("links", files, build) == {"n": 2}
    stale = cache_dir / f"catalog-links-{'0' * 24}.pickle"
    stale.write_bytes(b"")
    path.unlink()
    cache.cached("links", files, build)
    assert not stale.exists() and len(list(cache_dir.glob("catalog-links-*.pickle"))) == 1


def test_only_the_packaged_catalog_is_kept(cache_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / "links.yaml").write_text((DATA_DIR / "links.yaml").read_text())
    assert Catalog(copy).links.names() == Catalog(DATA_DIR).links.names()
    assert {p.name.split("-")[1] for p in cache_dir.glob("*.pickle")} == {"links"}
    assert not cache.enabled([copy / "links.yaml"])


def test_a_read_only_place_falls_back_to_the_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(cache, "CACHE_DIR", blocker / "sub")   # cannot be created
    monkeypatch.delenv("GPUCLUSTER_NO_CACHE", raising=False)
    assert cache.cached("links", [DATA_DIR / "links.yaml"], lambda: 42) == 42

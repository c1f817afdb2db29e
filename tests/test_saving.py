"""Saving and loading networks: a bit-exact round trip, atomic writes, and a damaged, truncated
or foreign file named with its path and key."""
import errno
import os
import re
import zipfile

import numpy as np
import pytest

import mlp_ref as mr

from _nets import net342, same_network

# -- save / load -----------------------------------------------------------------------
ARCHS = [
    dict(sizes=[3, 4, 2]),
    dict(sizes=[3, 4, 2], dtype=np.float32, seed=None),
    dict(sizes=[2, 1], hidden="tanh", output="sigmoid", init_std=0.0),
    dict(sizes=[5, 6, 4, 3, 2], hidden=["tanh", "relu", "sigmoid"], output="tanh", seed=2 ** 70),
    dict(sizes=[1, 7, 7, 1], hidden=["relu", "identity"], dtype=np.float32, init_std=1.5, seed=11),
]


@pytest.mark.parametrize("arch", ARCHS, ids=lambda a: str(a["sizes"]))
def test_save_load_round_trip_is_bit_exact(tmp_path, arch):
    net = mr.MLP(**arch)
    X = np.random.default_rng(1).normal(size=(6, net.sizes[0]))
    net.step(net.gradient(X, np.ones(net.sizes[-1])), 0.01)   # trained, not just as initialised
    path = tmp_path / "net.npz"
    net.save(path)
    loaded = mr.MLP.load(os.fsencode(path))          # Path, str and bytes all name a file
    same_network(net, loaded)
    assert all(v.flags.writeable for v in loaded.params.values())
    assert os.listdir(tmp_path) == ["net.npz"]        # no temporary file left behind
    # the file is plain arrays that a student can read with NumPy alone
    with np.load(path, allow_pickle=False) as f:
        assert f["sizes"].tolist() == net.sizes and f["activations"].tolist() == net.activations
        assert str(f["dtype"]) == net.dtype.name and f["W1"].dtype == net.dtype


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "net.npz"
    old = net342(seed=1)
    old.save(path)
    before = path.read_bytes()

    def torn_write(f, **arrays):
        f.write(b"PK\x03\x04 half a file")
        raise RuntimeError("the writer's own failure")

    monkeypatch.setattr(np, "savez", torn_write)
    with pytest.raises(RuntimeError, match="the writer's own failure"):   # passed on as it came
        net342(seed=2).save(str(path))
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["net.npz"]
    monkeypatch.undo()
    same_network(mr.MLP.load(path), old)


def _fills_up_half_way(f, **arrays):
    f.write(b"PK\x03\x04 half a file")
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _onto_dev_full(f, **arrays):
    """The real np.savez into a file whose descriptor now leads to /dev/full: the kernel's own
    ENOSPC, when the buffered bytes reach it."""
    full = os.open("/dev/full", os.O_WRONLY)
    os.dup2(full, f.fileno())
    os.close(full)
    SAVEZ(f, **arrays)


SAVEZ = np.savez
DEV_FULL = pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full on this system")


@pytest.mark.parametrize("writer", [_fills_up_half_way, pytest.param(_onto_dev_full, marks=DEV_FULL)],
                         ids=["ENOSPC-mid-write", "dev-full"])
@pytest.mark.parametrize("existed", [True, False], ids=["over-a-file", "new-file"])
def test_save_on_a_full_disk_names_path_and_leaves_no_partial_file(tmp_path, monkeypatch, writer, existed):
    """An OSError still (the machine failed, not the argument), errno ENOSPC, but its message
    starts with path: and says what happened to which file."""
    path = tmp_path / "net.npz"
    if existed:
        net342(seed=1).save(path)
    before = sorted(os.listdir(tmp_path)), path.read_bytes() if existed else None
    monkeypatch.setattr(np, "savez", writer)
    with pytest.raises(OSError) as info:
        net342(seed=2).save(path)
    message = str(info.value)
    assert info.value.errno == errno.ENOSPC and message.startswith(f"path: cannot write {str(path)!r}")
    assert "the disk is full" in message and ".tmp" not in message
    assert (sorted(os.listdir(tmp_path)), path.read_bytes() if existed else None) == before


def test_save_on_a_disk_that_fills_up_at_fsync_names_path(tmp_path, monkeypatch):
    """Some file systems (NFS, delayed allocation) report the full disk only when the bytes are
    forced out."""
    def fsync(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError, match=r"^path: .*net\.npz.*the disk is full") as info:
        net342().save(tmp_path / "net.npz")
    assert info.value.errno == errno.ENOSPC and os.listdir(tmp_path) == []


def test_save_refuses_a_network_it_could_not_load(tmp_path):
    net = net342()
    net.params["W2"][0, 0] = np.nan
    with pytest.raises(ValueError, match=r"^net: params\['W2'\]: expected finite values, got 1 NaN") as refused:
        net.save(tmp_path / "net.npz")
    assert refused.value.argument == "net"                 # save(net, path): the network is to blame
    net = net342()
    net.params["b1"] = net.params["b1"].astype(np.float32)
    with pytest.raises(ValueError, match=r"^net: params\['b1'\]: expected dtype float64"):
        net.save(tmp_path / "net.npz")
    assert not os.listdir(tmp_path)


@pytest.fixture
def saved(tmp_path):
    """A valid file of a [3, 4, 2] network, and its arrays to tamper with."""
    path = tmp_path / "net.npz"
    net342(seed=5).save(path)
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    return path, arrays


def rewrite(path, arrays, **changes):
    arrays = {**arrays, **changes}
    arrays = {k: v for k, v in arrays.items() if v is not None}
    with open(path, "wb") as f:
        np.savez(f, **arrays)


@pytest.mark.parametrize("keep", [0, 3, 30, 200, 0.5, -22, -1])
def test_truncated_file(saved, keep):
    path, _ = saved
    raw = path.read_bytes()
    path.write_bytes(raw[:int(len(raw) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(ValueError, match=rf"^path: {re.escape(repr(str(path)))} "):
        mr.MLP.load(path)


def test_flipped_byte_inside_an_array(saved):
    path, _ = saved
    raw = bytearray(path.read_bytes())
    raw[raw.index(b"W1.npy") + 200] ^= 0xFF          # inside W1's data: the zip CRC catches it
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"^path: .* is damaged or not an .npz file"):
        mr.MLP.load(path)


@pytest.mark.parametrize("content, pattern", [
    (b"sizes = [3, 4, 2]\n", r"is not an .npz file \(it starts with b'size'"),
    (bytes(np.random.default_rng(0).integers(0, 256, 500, dtype=np.uint8)), r"is not an .npz file"),
    (b"PK" + bytes(np.random.default_rng(1).integers(0, 256, 500, dtype=np.uint8)), r"is damaged"),
    (b"", r"is not an .npz file \(it starts with b''"),
])
def test_not_an_npz_file(tmp_path, content, pattern):
    path = tmp_path / "net.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=r"^path: .*" + pattern):
        mr.MLP.load(path)


def test_npy_and_foreign_npz_files(tmp_path):
    np.save(tmp_path / "a.npy", np.ones(3))
    with pytest.raises(ValueError, match=r"^path: .* is not an .npz file"):
        mr.MLP.load(tmp_path / "a.npy")
    np.savez(tmp_path / "other.npz", weights=np.ones(3))
    with pytest.raises(ValueError, match=r"^path: .* is not an mlp-ref network file \(no key 'format'; "
                                         r"keys \['weights'\]\)"):
        mr.MLP.load(tmp_path / "other.npz")
    with zipfile.ZipFile(tmp_path / "zip.npz", "w") as z:   # a zip, but of text, not of .npy arrays
        z.writestr("notes.txt", "hello")
    with pytest.raises(ValueError, match=r"^path: .*: key 'notes.txt': expected a NumPy array, got bytes"):
        mr.MLP.load(tmp_path / "zip.npz")
    np.savez(tmp_path / "obj.npz", format=np.array([None, 1], dtype=object))
    with pytest.raises(ValueError, match=r"^path: .* is damaged .*allow_pickle"):
        mr.MLP.load(tmp_path / "obj.npz")


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^path: cannot read .*nope.npz"):
        mr.MLP.load(tmp_path / "nope.npz")
    with pytest.raises(FileNotFoundError, match=r"^path: folder .* does not exist"):
        net342().save(tmp_path / "no" / "net.npz")


@pytest.mark.parametrize("change, pattern", [
    (dict(sizes=None), r"key 'sizes': missing"),
    (dict(seed=None), r"key 'seed': missing"),
    (dict(W2=None), r"key 'W2': missing; a network with sizes \[3, 4, 2\] has parameters"),
    (dict(W2=np.ones((2, 4))), r"key 'W2': expected shape \(4, 2\) \(sizes \[3, 4, 2\], dtype float64\), "
                               r"got shape \(2, 4\)"),
    (dict(b1=np.ones(4, dtype=np.float32)), r"key 'b1': expected dtype float64"),
    (dict(b1=np.array([0, 1, np.nan, 0])), r"key 'b1': expected finite values, got 1 NaN"),
    (dict(W3=np.ones((2, 2))), r"key 'W3': not part of a network with sizes \[3, 4, 2\]"),
    (dict(sizes=np.array([3, 5, 2])), r"key 'W1': expected shape \(3, 5\)"),
    (dict(sizes=np.array([3.0, 4.0, 2.0])), r"key 'sizes': expected a 1-D array of whole numbers"),
    (dict(sizes=np.array([3, 0, 2])), r"key 'sizes': sizes\[1\]: expected a whole number >= 1"),
    (dict(activations=np.array(["sigmoid"])), r"key 'activations': expected 2 names"),
    (dict(activations=np.array(["swish", "identity"])),
     r"key 'activations': activations\[0\]: unknown activation 'swish'; known: "),
    (dict(dtype=np.array("float16")), r"key 'dtype': expected 'float64' or 'float32', got 'float16'"),
    (dict(dtype=np.array("float32")), r"key 'W1': expected dtype float32"),
    (dict(init_std=np.array(-1.0)), r"key 'init_std': init_std: expected a number >= 0"),
    (dict(init_std=np.array(1e308)), r"key 'init_std': expected a number <= 2.81e\+306, so that every "
                                     r"parameter drawn fits in float64, got 1e\+308"),
    (dict(seed=np.array(3)), r"key 'seed': expected a single string"),
    (dict(seed=np.array("-3")), r"key 'seed': expected the digits of a whole number"),
    (dict(format=np.array(1.0)), r"key 'format': expected a single string, got array of shape \(\)"),
    (dict(format=np.array("mlp-ref MLP 2")), r"key 'format': expected 'mlp-ref MLP 1', got 'mlp-ref MLP 2'"),
], ids=lambda v: "+".join(v) if isinstance(v, dict) else "")
def test_tampered_file_names_the_key(saved, change, pattern):
    path, arrays = saved
    rewrite(path, arrays, **change)
    with pytest.raises(ValueError, match=rf"^path: {re.escape(repr(str(path)))}: " + pattern) as refused:
        mr.MLP.load(path)
    assert refused.value.argument == "path"           # the argument of load, whatever key is wrong

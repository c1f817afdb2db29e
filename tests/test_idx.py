"""MNIST from the user's IDX files (files/idx.py, ``continual-table --data mnist:DIR``), on small
IDX files written here by the format's definition (LeCun et al.'s page: big-endian magic 0x0803
for images, 0x0801 for labels, the dimensions as 4-byte integers, then unsigned bytes): read back
as written, gzipped or not; a missing, truncated, over-long or wrong-magic file refused in one line
naming it, exit status 2, no traceback; nothing downloaded."""
import gzip
import os

import numpy as np
import pytest

from mlp_ref.classroom import cli
from mlp_ref.files import idx
from mlp_ref.measurements import permuted


def idx_bytes(array, magic):
    header = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in array.shape)
    return header + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def write_mnist(folder, n_train=30, n_test=20, side=4, gz=False, seed=0):
    """Four IDX files of random side x side images, labels 0 .. 9 in turn; returns the arrays."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, size=(n, side, side), dtype=np.uint8)
        labels = (np.arange(n) % 10).astype(np.uint8)
        for kind, arr in (("images", images), ("labels", labels)):
            name = idx.FILES[split, kind] + (".gz" if gz else "")
            blob = idx_bytes(arr, idx.MAGIC[kind])
            with (gzip.open if gz else open)(os.path.join(folder, name), "wb") as f:
                f.write(blob)
        arrays[split] = (images, labels)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_the_four_files_read_back_as_written(tmp_path, gz):
    arrays = write_mnist(tmp_path, gz=gz)
    X, y, T, t = idx.load_mnist(str(tmp_path))
    assert np.array_equal(X, arrays["train"][0].reshape(30, 16)) and np.array_equal(y, arrays["train"][1])
    assert np.array_equal(T, arrays["test"][0].reshape(20, 16)) and np.array_equal(t, arrays["test"][1])
    Xs, _, _, _ = permuted.mnist(str(tmp_path))                      # GPM's scaling, exactly as stated
    assert np.array_equal(Xs, (X / 255.0 - 0.1307) / 0.3081)


def _spoil(folder, how):
    """One file of a good folder spoilt ``how``; returns the spoilt file's path."""
    path = os.path.join(folder, idx.FILES["train", "images"])
    blob = open(path, "rb").read()
    if how == "missing":
        os.remove(path)
    elif how == "truncated":
        open(path, "wb").write(blob[:-5])
    elif how == "header":
        open(path, "wb").write(blob[:7])
    elif how == "longer":
        open(path, "wb").write(blob + b"\0")
    elif how == "magic":                       # a labels file where the images should be
        open(path, "wb").write((0x0801).to_bytes(4, "big") + blob[4:])
    elif how == "gzip cut":
        os.remove(path)
        path += ".gz"
        open(path, "wb").write(gzip.compress(blob)[:-10])
    elif how == "labels":                      # one label fewer than images
        path = os.path.join(folder, idx.FILES["train", "labels"])
        open(path, "wb").write(idx_bytes(np.zeros(29), idx.MAGIC["labels"]))
    return path


@pytest.mark.parametrize("how, says", [("missing", "no such file"), ("truncated", "truncated"),
                                       ("header", "truncated"), ("longer", "longer than its header"),
                                       ("magic", "wrong magic number 0x00000801"), ("gzip cut", "gzip"),
                                       ("labels", "29 labels for 30 images")])
def test_a_bad_file_is_a_one_line_usage_error_naming_it(tmp_path, capsys, how, says):
    write_mnist(tmp_path)
    bad = _spoil(str(tmp_path), how)
    assert cli.main(["continual-table", "--data", f"mnist:{tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert bad.removesuffix(".gz") in err and says in err, err


def test_a_missing_folder_is_named(tmp_path, capsys):
    assert cli.main(["continual-table", "--data", f"mnist:{tmp_path / 'absent'}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(tmp_path / "absent") in err and "no such folder" in err


def test_keras_npz_is_named_as_not_idx(tmp_path):
    np.savez(tmp_path / "mnist.npz", x_train=np.zeros((1, 2, 2)))
    with pytest.raises(idx.IDXError, match="Keras's NumPy archive, not the IDX files"):
        idx.load_mnist(str(tmp_path))


def test_the_protocol_runs_on_mini_batches_of_the_users_images(tmp_path):
    """Two tasks of 30 images, batches of 10: each step takes the next 10 of the task's shuffle,
    GPM's bases read 5 of its images (ranks at most 5 per layer), and the untrained network's
    accuracies b are FWT's reference."""
    write_mnist(tmp_path)
    images = permuted.mnist(str(tmp_path))
    result = permuted.run(methods=("naive", "gpm"), images=images, tasks=2, hidden=8, steps=3, batch=10,
                          basis_rows=5, activation="relu", memory=False)
    gpm = result["methods"]["gpm"]
    assert max(max(r) for r in gpm["ranks"]) <= 5
    for r in result["methods"].values():
        run = r["runs"][0]
        assert r["FWT"] == run["R"][0, 1] - run["b"][1] and r["peak_mib"] is None


@pytest.mark.slow
def test_continual_table_runs_the_protocol_on_the_users_files(tmp_path, capsys):
    """The whole command on two tasks of 30 tiny images: the MNIST protocol's network over the
    files' pixels, GPM's batches of 10 (one epoch: 3 steps a task), every method, its JSON."""
    write_mnist(tmp_path)
    out = tmp_path / "t.json"
    assert cli.main(["continual-table", "--data", f"mnist:{tmp_path}", "--tasks", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Permuted MNIST: 2 tasks, [16, 100, 100, 10] relu, 3 steps of 10 images per task")
    doc = permuted.from_json(__import__("json").loads(out.read_text()))
    assert doc["setup"]["data"] == "mnist" and doc["setup"]["n_train"] == 30
    for name, r in doc["methods"].items():
        assert r["R"].shape == (2, 2) and (r["ACC"], r["BWT"]) == permuted.acc_bwt(r["R"]), name
        assert r["peak_mib"] > 0 and r["ACC_std"] is None

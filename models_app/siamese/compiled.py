"""The pretrained tower served through ONNX Runtime: exported from the version's own files,
quantised to int8 token by token, checked before it serves; training stays in PyTorch.

A version folder of the tower (a sentence-transformers folder) gets a ``compiled-onnx`` folder
beside its files: ``model.onnx`` (the whole encoder, tokens in and sentence vectors out) and a
manifest naming what it was compiled from (a digest of the version's files), by which recipe,
the digest of ``model.onnx`` itself, and PyTorch's vectors of a few probe texts. The worker
writes it (``compile_tower``, after a version is stored) under a temporary name and renames it
into place. ``CompiledServing`` is what a served tower holds: the session when the folder is
whole and of this version, else the reason it is not, logged once, while PyTorch encodes; it
looks again at most once a minute, so a folder the worker writes again is taken up without a
restart. The student (the n-gram bag) is not compiled: hashing its n-grams is most of its
encoding, its forward a tenth at most (``bench/compiled_encoders.py``).

The recipe: ``torch.onnx`` export with eager attention; ONNX Runtime's transformer fusions
(layer norms, GELU; attention left as plain ops so that its projections are quantised too);
every weight matrix int8 per output channel; and each activation entering one quantised with a
scale of its own **per token**, not per tensor as ONNX Runtime's dynamic quantisation does. Per
tensor, a text's vector depends on the other texts of its batch (their largest activation sets
its scale: cosine 0.99 between a title encoded alone and in a batch); per token it does not,
and it stays within 0.005 of PyTorch in cosine for most titles
(``docs/decisions/compiled-tower.md``).
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from models_app.siamese.artifacts import (
    MANIFEST,
    ArtifactError,
    atomic_directory,
    read_manifest,
    write_manifest,
)
from models_app.siamese.networks.base import MAPPED_WEIGHTS

logger = logging.getLogger(__name__)

COMPILED_FOLDER = "compiled-onnx"
COMPILED_ARTIFACT = "compiled-encoder"
_MODEL_FILE = "model.onnx"
# Folders a process writes into a version folder from its files (the weights as served, the
# compiled copy): derived, never part of the version itself.
DERIVED_FOLDERS = (COMPILED_FOLDER, MAPPED_WEIGHTS)
# Files of a version folder that are derived from it, not part of what is compiled.
_DERIVED = {*DERIVED_FOLDERS, MANIFEST}
# A folder compiled by another recipe is stale: change this with the export or quantisation.
RECIPE = (
    "onnx opset 17 eager export, ort fusions but attention, "
    "int8 weights per channel, int8 activations per token, v1"
)
_OPSET = 17
# Texts whose PyTorch vectors the manifest keeps: a compiled model must answer each of them
# this near PyTorch before it serves (per-token int8 keeps real titles above 0.99, odd texts
# such as "x" above 0.985; a graph that a runtime optimises wrongly falls far below).
PROBE_TEXTS = (
    "Registered Nurse",
    "senior java developer (m/w/d) remote",
    "HGV Class 1 Driver - nights",
    "CEO",
    "Verkäufer/in Teilzeit",
    "x",
)
PROBE_MIN_COSINE = 0.98
# A served tower whose compiled folder cannot serve looks at it again this often (seconds).
RECHECK_SECONDS = 60.0


def onnxruntime_available() -> bool:
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return True


def source_digest(folder: Path) -> str:
    """SHA-256 of every file of the version folder but the derived ones (``_DERIVED``, hidden
    scratch folders): what a compiled model was made from."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if relative.parts[0] in _DERIVED or relative.parts[0].startswith("."):
            continue
        if path.is_file():
            digest.update(str(relative).encode() + b"\0")
            digest.update(_file_digest(path).encode() + b"\0")
    return digest.hexdigest()


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _threads() -> int:
    return max(1, torch.get_num_threads())


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


class CompiledTower:
    """An ONNX Runtime session of a compiled tower. Sessions are made per thread count (PyTorch's
    in this process, as the PyTorch path would use); a session of one thread starts no thread
    pool, so a process forked after it was made (gunicorn's workers) uses it as it is and shares
    its pages, while one of more threads is made again in each process."""

    def __init__(self, path: Path, input_names: Sequence[str]) -> None:
        self.path = Path(path)
        self.input_names = tuple(input_names)
        self._sessions: dict[tuple[int, int | None], Any] = {}
        self._lock = threading.Lock()

    def session(self) -> Any:
        threads = _threads()
        key = (threads, None if threads == 1 else os.getpid())
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                session = self._sessions[key] = _session(self.path, threads)
        return session

    def run(self, features: dict[str, torch.Tensor]) -> np.ndarray:
        """The sentence vectors (B, D), not normalised, of tokenised texts."""
        feed = {name: features[name].contiguous().numpy() for name in self.input_names}
        return self.session().run(None, feed)[0]


def _session(path: Path, threads: int) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Basic optimisations only: the extended ones fuse a quantised product with its scales on
    # the assumption of one scale per tensor, and answer wrongly with one per token.
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    return onnxruntime.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"]
    )


def load_compiled(
    folder: Path, featurize: Callable[[list[str]], dict[str, torch.Tensor]]
) -> CompiledTower:
    """The compiled tower of the version in ``folder``; an ``ArtifactError`` saying why when
    it is missing, of another version or recipe (stale), damaged, or answers its probes unlike
    PyTorch did."""
    folder = Path(folder)
    compiled = folder / COMPILED_FOLDER
    if not onnxruntime_available():
        raise ArtifactError("onnxruntime is not installed")
    if not compiled.is_dir():
        raise ArtifactError(f"{compiled} is missing")
    manifest = read_manifest(compiled, kind=COMPILED_ARTIFACT)
    if manifest.get("recipe") != RECIPE:
        raise ArtifactError(
            f"{compiled} is stale: compiled by recipe {manifest.get('recipe')!r}, not {RECIPE!r}"
        )
    if manifest.get("source") != source_digest(folder):
        raise ArtifactError(f"{compiled} is stale: compiled from other files than {folder}'s")
    path = compiled / _MODEL_FILE
    try:
        actual = _file_digest(path)
    except OSError as exc:
        raise ArtifactError(f"{path} is unreadable: {exc}") from None
    if actual != manifest.get("model_sha256"):
        raise ArtifactError(f"{path} is damaged: its digest is not the one compiled")
    try:
        tower = CompiledTower(path, manifest["inputs"])
        expected = np.asarray(manifest["probe_vectors"], dtype=np.float32)
    except (KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{compiled} has an unusable manifest: {exc}") from None
    try:
        probes = unit_rows(tower.run(featurize(list(PROBE_TEXTS))))
    except Exception as exc:  # onnxruntime raises its own kinds for a file it cannot run
        raise ArtifactError(f"{path} cannot be run: {exc}") from None
    _check_probes(probes, expected, path)
    return tower


def _check_probes(compiled: np.ndarray, pytorch: np.ndarray, path: Path) -> None:
    if compiled.shape != pytorch.shape:
        raise ArtifactError(f"{path} answers {compiled.shape}, PyTorch {pytorch.shape}")
    cosines = (compiled * pytorch).sum(axis=1)
    if cosines.min() < PROBE_MIN_COSINE:
        raise ArtifactError(
            f"{path} answers a probe text unlike PyTorch (cosine {cosines.min():.3f}, "
            f"at least {PROBE_MIN_COSINE} expected)"
        )


class CompiledServing:
    """What a served tower holds of its compiled model: the tower when its folder can serve,
    else ``problem`` (why not), logged once; looked at again at most every ``recheck_seconds``
    and only when the folder's manifest changed. Never copied: a fine-tune deep-copies the live
    tower and trains the copy, which the compiled weights would no longer describe."""

    def __init__(
        self,
        folder: Path,
        featurize: Callable[[list[str]], dict[str, torch.Tensor]],
        *,
        recheck_seconds: float = RECHECK_SECONDS,
    ) -> None:
        self.folder = Path(folder)
        self.featurize = featurize
        self.recheck_seconds = recheck_seconds
        self.tower: CompiledTower | None = None
        self.problem: str | None = None
        self._looked_at: tuple[float, tuple | None] = (0.0, None)
        self._lock = threading.Lock()
        self._load()

    def __deepcopy__(self, memo: dict) -> None:
        return None

    def _manifest_stamp(self) -> tuple | None:
        try:
            stat = (self.folder / COMPILED_FOLDER / MANIFEST).stat()
        except OSError:
            return None
        return (stat.st_ino, stat.st_mtime_ns, stat.st_size)

    def _load(self) -> None:
        self._looked_at = (time.monotonic(), self._manifest_stamp())
        try:
            self.tower = load_compiled(self.folder, self.featurize)
        except ArtifactError as exc:
            if self.problem is None:
                logger.warning(
                    "%s: PyTorch encodes until the compiled model is rebuilt: %s",
                    self.folder,
                    exc,
                )
            self.problem = str(exc)
            return
        if self.problem is not None:
            logger.info("%s: the compiled model serves again", self.folder)
        self.problem = None

    def current(self) -> CompiledTower | None:
        """The compiled tower to encode with, or None (PyTorch encodes)."""
        if self.tower is not None:
            return self.tower
        if time.monotonic() - self._looked_at[0] < self.recheck_seconds:
            return None
        with self._lock:
            looked, stamp = self._looked_at
            if self.tower is None and time.monotonic() - looked >= self.recheck_seconds:
                if stamp is None or self._manifest_stamp() != stamp:
                    self._load()
                else:
                    self._looked_at = (time.monotonic(), stamp)
        return self.tower


# -- compiling (the worker) ------------------------------------------------------------------


class _TokensToVectors(torch.nn.Module):
    """The whole sentence-transformers model as one graph: token tensors in, sentence vectors
    out (pooling and any dense or normalising module included)."""

    def __init__(self, model: Any, names: Sequence[str]) -> None:
        super().__init__()
        self.model = model
        self.names = tuple(names)

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.model(dict(zip(self.names, tensors, strict=True)))["sentence_embedding"]


def reference_vectors(model: Any, featurize: Callable, texts: Sequence[str]) -> np.ndarray:
    """PyTorch's unit vectors of ``texts``: what a compiled model must keep."""
    with torch.inference_mode():
        vectors = model.eval()(featurize(list(texts)))["sentence_embedding"]  # (B, D)
    return unit_rows(vectors.float().numpy())


def export_onnx(model: Any, featurize: Callable, path: Path) -> list[str]:
    """Export the sentence-transformers ``model`` to ``path`` as one float32 ONNX graph (tokens
    in, sentence vectors out) with ONNX Runtime's transformer fusions of layer norms and GELU;
    returns its input names. ``model`` is copied, never changed."""
    from onnxruntime.transformers import optimizer
    from onnxruntime.transformers.fusion_options import FusionOptions

    model = copy.deepcopy(model).eval()
    auto_model = getattr(model[0], "auto_model", None)
    if auto_model is not None and hasattr(auto_model, "set_attn_implementation"):
        # Eager attention exports as plain products and a softmax; scaled-dot-product
        # attention exports as a pattern the fusions below do not read.
        auto_model.set_attn_implementation("eager")
    example = featurize(list(PROBE_TEXTS))
    names = sorted(example)
    with tempfile.TemporaryDirectory(prefix="siamweb-export-") as scratch:
        exported = Path(scratch) / "exported.onnx"
        with warnings.catch_warnings(), torch.inference_mode():
            warnings.simplefilter("ignore")  # the tracer's notes on shapes taken as constants
            torch.onnx.export(
                _TokensToVectors(model, names),
                tuple(example[n] for n in names),
                str(exported),
                input_names=names,
                output_names=["sentence_embedding"],
                dynamic_axes={
                    **{n: {0: "batch", 1: "tokens"} for n in names},
                    "sentence_embedding": {0: "batch"},
                },
                opset_version=_OPSET,
                dynamo=False,
            )
        options = FusionOptions("bert")
        # A fused attention node takes one scale for its input: its projections could then
        # only be quantised per tensor. Unfused, they are products like any other.
        options.enable_attention = False
        config = getattr(auto_model, "config", None)
        with _quiet_tools():
            optimizer.optimize_model(
                str(exported),
                model_type="bert",
                num_heads=int(getattr(config, "num_attention_heads", 0)),
                hidden_size=int(getattr(config, "hidden_size", 0)),
                optimization_options=options,
                opt_level=0,
            ).save_model_to_file(str(path))
    return names


def quantize_per_token(source: Path, path: Path) -> None:
    """``source`` with every product by a weight matrix in int8: weights per output channel,
    the activation entering it per token (row), symmetric, computed as it comes."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    graph = onnx.load(str(source)).graph
    weights = {tensor.name for tensor in graph.initializer}
    products = [n.name for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]
    with tempfile.TemporaryDirectory(prefix="siamweb-quantize-") as scratch:
        per_tensor = Path(scratch) / "per-tensor.onnx"
        with _quiet_tools():
            quantize_dynamic(
                str(source),
                str(per_tensor),
                weight_type=QuantType.QInt8,
                per_channel=True,
                op_types_to_quantize=["MatMul"],
                nodes_to_quantize=products,
                # The fused graph's own ops leave some outputs untyped: they are float32.
                extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
            )
        model = onnx.load(str(per_tensor))
    _scales_per_token(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _scales_per_token(model: Any) -> None:
    """Replace each ``DynamicQuantizeLinear`` (one scale and zero point for the whole tensor)
    by its per-row form: scale = max |x| / 127 over the row's last axis, x / scale rounded and
    shifted by 128 into uint8, zero point 128. The products downstream already multiply by the
    scale tensor it outputs, which now broadcasts over rows."""
    import onnx
    from onnx import helper, numpy_helper

    graph = model.graph
    constants = {
        "per_token_127": np.array(127.0, np.float32),
        "per_token_tiny": np.array(1e-12, np.float32),
        "per_token_128": np.array(128.0, np.float32),
        "per_token_0": np.array(0.0, np.float32),
        "per_token_255": np.array(255.0, np.float32),
        "per_token_zero_point": np.array(128, np.uint8),
    }
    graph.initializer.extend(numpy_helper.from_array(v, name) for name, v in constants.items())
    nodes, rescaled = [], set()
    for node in graph.node:
        if node.op_type != "DynamicQuantizeLinear":
            nodes.append(node)
            continue
        (x,) = node.input
        quantized, scale, zero_point = node.output
        rescaled.update(node.output)
        p = f"{node.name or x}/per_token"
        nodes += [
            helper.make_node("Abs", [x], [f"{p}/abs"]),
            helper.make_node("ReduceMax", [f"{p}/abs"], [f"{p}/max"], axes=[-1], keepdims=1),
            helper.make_node("Div", [f"{p}/max", "per_token_127"], [f"{p}/raw_scale"]),
            helper.make_node("Max", [f"{p}/raw_scale", "per_token_tiny"], [scale]),  # (..., 1)
            helper.make_node("Reciprocal", [scale], [f"{p}/inverse"]),
            helper.make_node("Mul", [x, f"{p}/inverse"], [f"{p}/scaled"]),
            helper.make_node("Round", [f"{p}/scaled"], [f"{p}/rounded"]),
            helper.make_node("Add", [f"{p}/rounded", "per_token_128"], [f"{p}/shifted"]),
            helper.make_node(
                "Clip", [f"{p}/shifted", "per_token_0", "per_token_255"], [f"{p}/clipped"]
            ),
            helper.make_node("Cast", [f"{p}/clipped"], [quantized], to=onnx.TensorProto.UINT8),
            helper.make_node("Identity", ["per_token_zero_point"], [zero_point]),
        ]
    del graph.node[:]
    graph.node.extend(nodes)
    # Shapes recorded for the old scalar scales no longer hold.
    kept = [info for info in graph.value_info if info.name not in rescaled]
    del graph.value_info[:]
    graph.value_info.extend(kept)


def compile_tower(folder: Path, model: Any, featurize: Callable) -> bool:
    """Compile the tower saved in ``folder`` into ``folder/compiled-onnx`` unless a whole,
    current one is there; True when it wrote one. ``model`` is the sentence-transformers model
    loaded from ``folder`` and ``featurize`` its tokeniser (``TransformerEncoder``'s). A stale
    or damaged folder is replaced: set aside, the new one written and renamed into place."""
    folder = Path(folder)
    target = folder / COMPILED_FOLDER
    try:
        load_compiled(folder, featurize)
        return False
    except ArtifactError:
        pass
    source = source_digest(folder)
    pytorch = reference_vectors(model, featurize, PROBE_TEXTS)
    with tempfile.TemporaryDirectory(prefix="siamweb-compile-") as scratch:
        exported = Path(scratch) / "float32.onnx"
        names = export_onnx(model, featurize, exported)
        stale = _set_aside(target)
        try:
            with atomic_directory(target) as written:
                quantized = written / _MODEL_FILE
                quantize_per_token(exported, quantized)
                probes = unit_rows(CompiledTower(quantized, names).run(featurize(PROBE_TEXTS)))
                _check_probes(probes, pytorch, quantized)
                write_manifest(
                    written,
                    {
                        "artifact": COMPILED_ARTIFACT,
                        "recipe": RECIPE,
                        "source": source,
                        "model_sha256": _file_digest(quantized),
                        "inputs": names,
                        "probe_vectors": pytorch.round(6).tolist(),
                        "onnxruntime": _version("onnxruntime"),
                        "torch": torch.__version__,
                    },
                )
        except (ArtifactError, OSError):
            if not (target / MANIFEST).exists():  # else another process's folder won the rename
                raise
            return False
        finally:
            if stale is not None:
                shutil.rmtree(stale, ignore_errors=True)
    return True


@contextlib.contextmanager
def _quiet_tools() -> Iterator[None]:
    """ONNX Runtime's fusion and quantisation tools log every node they touch, some through
    the root logger: a compile would write a hundred lines into the worker's log."""
    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))
    try:
        yield
    finally:
        root.setLevel(level)


def _set_aside(target: Path) -> Path | None:
    """Rename a stale or damaged compiled folder out of the way (a process that has its file
    open keeps reading it); the caller deletes it once the new one is in place."""
    if not target.exists():
        return None
    aside = target.with_name(f".stale-{target.name}-{uuid.uuid4().hex[:8]}")
    try:
        target.rename(aside)
    except FileNotFoundError:
        return None
    return aside


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)

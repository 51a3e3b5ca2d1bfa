"""ncudnn.types equals the cuDNN headers' facts in ncudnn/_data/cudnn_api.json: every enum, every value
(aliases included), module-level constants, and the generator's --check."""
import json
import pathlib
import subprocess
import sys
from enum import IntEnum

import pytest

import ncudnn
from ncudnn import types

ROOT = pathlib.Path(__file__).resolve().parents[1]
API = json.loads((ROOT / "ncudnn" / "_data" / "cudnn_api.json").read_text())
ENUM_NAMES = list(API["enums"])


def test_counts():
    assert len(API["enums"]) == 69
    assert sum(len(e["values"]) for e in API["enums"].values()) == 937
    assert set(types.ENUMS) == set(API["enums"])
    assert sum(len(cls.__members__) for cls in types.ENUMS.values()) == 937


@pytest.mark.parametrize("enum_name", ENUM_NAMES)
def test_enum_matches_headers(enum_name):
    spec = API["enums"][enum_name]["values"]
    cls = getattr(types, enum_name)
    assert issubclass(cls, IntEnum) and types.ENUMS[enum_name] is cls
    assert list(cls.__members__) == list(spec)  # names, in header order, aliases included
    for name, value in spec.items():
        member = cls[name]
        assert int(member) == value, f"{enum_name}.{name}"
        assert cls(value) == value


def test_aliases_share_values():
    S = types.cudnnStatus_t
    assert S.CUDNN_STATUS_ALLOC_FAILED is S.CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED
    assert S.CUDNN_STATUS_ARCH_MISMATCH is S.CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH
    assert S.CUDNN_STATUS_MAPPING_ERROR is S.CUDNN_STATUS_INTERNAL_ERROR_TEXTURE_CREATION_FAILED
    assert S.CUDNN_STATUS_VERSION_MISMATCH is S.CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH
    assert int(S.CUDNN_STATUS_INVALID_VALUE) == 2001


@pytest.mark.parametrize("enum_name", ENUM_NAMES)
def test_module_level_constants(enum_name):
    for name, value in API["enums"][enum_name]["values"].items():
        const = getattr(ncudnn, name)
        assert int(const) == value, name


def test_known_constants_and_macros():
    assert ncudnn.CUDNN_STATUS_BAD_PARAM == 2000 and isinstance(ncudnn.CUDNN_STATUS_BAD_PARAM, ncudnn.cudnnStatus_t)
    assert ncudnn.CUDNN_DATA_BFLOAT16 == 9 and ncudnn.CUDNN_SEV_INFO == 3
    assert ncudnn.CUDNN_ERRQUERY_BLOCKING == 2
    for k, v in API["macros"].items():
        assert types.MACROS[k] == v


def test_generator_check_passes():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_types.py"), "--check"], capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_generator_check_catches_a_stale_file(tmp_path):
    """--check is not a test that cannot fail: against an edited copy it fails."""
    tools = tmp_path / "tools"
    data = tmp_path / "ncudnn" / "_data"
    tools.mkdir()
    data.mkdir(parents=True)
    (tools / "gen_types.py").write_text((ROOT / "tools" / "gen_types.py").read_text())
    (data / "cudnn_api.json").write_text((ROOT / "ncudnn" / "_data" / "cudnn_api.json").read_text())
    text = (ROOT / "ncudnn" / "types.py").read_text()
    (tmp_path / "ncudnn" / "types.py").write_text(text.replace("CUDNN_STATUS_BAD_PARAM = 2000",
                                                               "CUDNN_STATUS_BAD_PARAM = 2001"))
    out = subprocess.run([sys.executable, str(tools / "gen_types.py"), "--check"], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 1 and "stale" in out.stderr

"""ncudnn.log: CUDNN_LOGLEVEL_DBG / CUDNN_LOGDEST_DBG, the C-style callback API, cudnnDebug_t, and
failures of C-style calls logged at ERROR."""
import os
import threading
import time

import pytest

import ncudnn
from ncudnn import log
from ncudnn.errors import cudnnGetLastErrorString

S = ncudnn.cudnnStatus_t
SEV = ncudnn.cudnnSeverity_t


@pytest.fixture(autouse=True)
def quiet_logging():
    log.reload_from_env({})
    yield
    log.reload_from_env({})


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, sev, udata, dbg, msg):
        self.calls.append((sev, udata, dbg, msg))


def test_mask_bits_are_severity_positions():
    assert (log.CUDNN_SEV_ERROR_EN, log.CUDNN_SEV_WARNING_EN, log.CUDNN_SEV_INFO_EN) == (0b0010, 0b0100, 0b1000)


@pytest.mark.parametrize("level,mask", [("0", 0), ("1", 0b0010), ("2", 0b0110), ("3", 0b1110), ("", 0),
                                        ("junk", 0)])
def test_loglevel_env(level, mask):
    log.reload_from_env({"CUDNN_LOGLEVEL_DBG": level})
    err, got, udata, fptr = log.cudnnGetCallback()
    assert err == S.CUDNN_STATUS_SUCCESS and got == mask and udata is None and fptr is None
    assert log.enabled(SEV.CUDNN_SEV_ERROR) == bool(mask & 0b0010)
    assert log.enabled(SEV.CUDNN_SEV_WARNING) == bool(mask & 0b0100)
    assert log.enabled(SEV.CUDNN_SEV_INFO) == bool(mask & 0b1000)
    assert log.enabled(SEV.CUDNN_SEV_FATAL)


def test_legacy_per_level_switches():
    log.reload_from_env({"CUDNN_LOGWARN_DBG": "1", "CUDNN_LOGINFO_DBG": "1"})
    assert log.cudnnGetCallback()[1] == 0b1100


def test_file_destination_and_level_filter(tmp_path):
    path = tmp_path / "cudnn.log"
    log.reload_from_env({"CUDNN_LOGLEVEL_DBG": "2", "CUDNN_LOGDEST_DBG": str(path)})
    assert log.log(SEV.CUDNN_SEV_WARNING, "plan cache full\nsecond line")
    assert not log.log(SEV.CUDNN_SEV_INFO, "not at level 2")
    assert log.log(SEV.CUDNN_SEV_ERROR, "bad stride", status=S.CUDNN_STATUS_BAD_PARAM)
    log.reload_from_env({})  # closes the file
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0] == f"W! CuDNN (v{ncudnn.CUDNN_VERSION}) plan cache full"
    assert lines[1] == "w!     second line"
    assert lines[2].startswith("w! Time: ") and "since start)" in lines[2]
    assert lines[3].startswith(f"w! Process={os.getpid()}; Thread=")
    assert "E! CuDNN" in text and "bad stride" in text
    assert "not at level 2" not in text


@pytest.mark.parametrize("dest", ["stdout", "stderr"])
def test_std_destinations(capsys, dest):
    log.reload_from_env({"CUDNN_LOGLEVEL_DBG": "3", "CUDNN_LOGDEST_DBG": dest})
    assert log.log(SEV.CUDNN_SEV_INFO, "hello info")
    out, err = capsys.readouterr()
    got, other = (out, err) if dest == "stdout" else (err, out)
    assert got.startswith(f"I! CuDNN (v{ncudnn.CUDNN_VERSION}) hello info\n") and other == ""


def test_no_destination_means_no_output(capsys):
    log.reload_from_env({"CUDNN_LOGLEVEL_DBG": "3"})
    assert not log.log(SEV.CUDNN_SEV_INFO, "nowhere to go")
    assert capsys.readouterr() == ("", "")


def test_unwritable_destination_is_quiet(tmp_path):
    log.reload_from_env({"CUDNN_LOGLEVEL_DBG": "1", "CUDNN_LOGDEST_DBG": str(tmp_path / "no" / "dir" / "x")})
    assert not log.log(SEV.CUDNN_SEV_ERROR, "dropped")


def test_user_callback_gets_debug_record():
    rec = Recorder()
    token = object()
    before = time.time()
    assert log.cudnnSetCallback(log.CUDNN_SEV_WARNING_EN, token, rec) == (S.CUDNN_STATUS_SUCCESS,)
    assert log.cudnnGetCallback() == (S.CUDNN_STATUS_SUCCESS, log.CUDNN_SEV_WARNING_EN, token, rec)

    class H:
        stream, device_id = 1234, 0

    h = H()
    assert log.log(SEV.CUDNN_SEV_WARNING, "w1", handle=h, status=S.CUDNN_STATUS_NOT_SUPPORTED)
    assert not log.log(SEV.CUDNN_SEV_INFO, "i1")  # masked
    assert not log.log(SEV.CUDNN_SEV_ERROR, "e1")  # masked
    assert log.log(SEV.CUDNN_SEV_FATAL, "f1")  # always on
    assert [c[3] for c in rec.calls] == ["w1", "f1"]
    sev, udata, dbg, msg = rec.calls[0]
    assert sev is SEV.CUDNN_SEV_WARNING and udata is token
    assert isinstance(dbg, log.cudnnDebug_t)
    assert dbg.cudnn_version == ncudnn.CUDNN_VERSION
    assert dbg.cudnnStatus == S.CUDNN_STATUS_NOT_SUPPORTED
    assert before - 1 <= dbg.time_sec + dbg.time_usec / 1e6 <= time.time() + 1
    assert 0 <= dbg.time_usec < 1_000_000 and dbg.time_delta >= 0
    assert dbg.handle is h and dbg.stream == 1234 and dbg.cudaDeviceId == 0
    assert dbg.pid == os.getpid() and dbg.tid == threading.get_native_id()
    assert len(dbg.reserved) == 15
    for field in ("cudnn_version", "cudnnStatus", "time_sec", "time_usec", "time_delta", "handle", "stream",
                  "pid", "tid", "cudaDeviceId", "reserved"):
        assert hasattr(dbg, field)


def test_back_to_builtin_callback(tmp_path):
    path = tmp_path / "l.txt"
    log.reload_from_env({"CUDNN_LOGDEST_DBG": str(path)})
    rec = Recorder()
    log.cudnnSetCallback(log.CUDNN_SEV_ERROR_EN, None, rec)
    log.log(SEV.CUDNN_SEV_ERROR, "to the user")
    assert log.cudnnSetCallback(log.CUDNN_SEV_ERROR_EN, None, None) == (S.CUDNN_STATUS_SUCCESS,)
    assert log.cudnnGetCallback()[3] is None
    log.log(SEV.CUDNN_SEV_ERROR, "to the file")
    log.reload_from_env({})
    assert [c[3] for c in rec.calls] == ["to the user"]
    assert "to the file" in path.read_text() and "to the user" not in path.read_text()


@pytest.mark.parametrize("mask,fptr", [(-1, None), ("3", None), (1 << 33, None), (True, None), (2, 42)])
def test_set_callback_bad_param(mask, fptr):
    err = log.cudnnSetCallback(mask, None, fptr)
    assert err == (S.CUDNN_STATUS_BAD_PARAM,)
    assert "cudnnSetCallback" in cudnnGetLastErrorString()
    assert log.cudnnGetCallback()[1] == 0  # state unchanged


def test_failed_c_call_logged_at_error():
    rec = Recorder()
    log.cudnnSetCallback(log.CUDNN_SEV_ERROR_EN, None, rec)
    err, value = ncudnn.cudnnGetProperty(99)
    assert err == S.CUDNN_STATUS_BAD_PARAM and value is None
    assert len(rec.calls) == 1
    sev, _, dbg, msg = rec.calls[0]
    assert sev is SEV.CUDNN_SEV_ERROR and dbg.cudnnStatus == S.CUDNN_STATUS_BAD_PARAM
    assert msg.startswith("Error: CUDNN_STATUS_BAD_PARAM; Reason: cudnnGetProperty")
    assert "cudnnGetProperty" in cudnnGetLastErrorString()  # the last-error string is still kept


def test_failures_silent_when_errors_off():
    rec = Recorder()
    log.cudnnSetCallback(log.CUDNN_SEV_INFO_EN, None, rec)
    ncudnn.cudnnGetProperty(99)
    assert rec.calls == []


def test_raising_callback_is_contained():
    def boom(*a):
        raise RuntimeError("callback bug")

    log.cudnnSetCallback(log.CUDNN_SEV_ERROR_EN, None, boom)
    assert log.log(SEV.CUDNN_SEV_ERROR, "x") is False
    assert ncudnn.cudnnGetProperty(99)[0] == S.CUDNN_STATUS_BAD_PARAM


def test_callback_that_fails_a_call_does_not_recurse():
    rec = Recorder()

    def cb(sev, udata, dbg, msg):
        rec(sev, udata, dbg, msg)
        ncudnn.cudnnGetProperty(77)  # fails inside the callback: must not log again

    log.cudnnSetCallback(log.CUDNN_SEV_ERROR_EN, None, cb)
    ncudnn.cudnnGetProperty(99)
    assert len(rec.calls) == 1


def test_api_call_info_lines():
    rec = Recorder()
    log.cudnnSetCallback(log.CUDNN_SEV_INFO_EN, None, rec)
    log.api_call("cudnnSetStream", {"handle": "h", "streamId": 7})
    assert rec.calls[0][3] == "function cudnnSetStream() called:\n    handle: 'h'\n    streamId: 7"


def test_format_message_layout():
    dbg = log.cudnnDebug_t(cudnn_version=92700, time_sec=90061, time_usec=5, time_delta=90061, pid=7, tid=8,
                           cudaDeviceId=0, stream=0)
    text = log.format_message(SEV.CUDNN_SEV_ERROR, "a\nb", dbg)
    lines = text.splitlines()
    assert lines[0] == "E! CuDNN (v92700) a" and lines[1] == "e!     b"
    assert lines[2].endswith("(1d+1h+1m+1s since start)")
    assert lines[3] == "e! Process=7; Thread=8; GPU=0; Handle=NULL; StreamId=0."

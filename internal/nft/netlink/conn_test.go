package netlink

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestAnswer checks how one message of an exchange ends it.
func TestAnswer(t *testing.T) {
	data := nlMsg{typ: unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_NEWSETELEM, flags: unix.NLM_F_MULTI, data: []byte{2, 0, 0, 0}}
	intr := data
	intr.flags |= unix.NLM_F_DUMP_INTR
	done := nlMsg{typ: unix.NLMSG_DONE, flags: unix.NLM_F_MULTI, data: []byte{0, 0, 0, 0}}
	doneIntr := done
	doneIntr.flags |= unix.NLM_F_DUMP_INTR
	doneErr := done
	doneErr.data = putErrno(-int32(unix.EBUSY))
	ack := nlMsg{typ: unix.NLMSG_ERROR, data: make([]byte, 4+nlmsgHdrLen)}
	fail := nlMsg{typ: unix.NLMSG_ERROR, data: append(putErrno(-int32(unix.ENOENT)), make([]byte, nlmsgHdrLen)...)}
	errFn := errors.New("from fn")
	for _, tc := range []struct {
		name    string
		m       nlMsg
		dump    bool
		fnErr   error
		wantEnd bool
		wantErr error
		called  bool
	}{
		{"data", data, true, nil, false, nil, true},
		{"data fn error", data, true, errFn, false, errFn, true},
		{"data interrupted", intr, true, nil, false, errDumpInterrupted, false},
		{"done", done, true, nil, true, nil, false},
		{"done interrupted", doneIntr, true, nil, true, errDumpInterrupted, false},
		{"done with error", doneErr, true, nil, true, unix.EBUSY, false},
		{"dump ack", ack, true, nil, false, nil, false},
		{"request ack", ack, false, nil, true, nil, false},
		{"request error", fail, false, nil, true, unix.ENOENT, false},
		{"dump error", fail, true, nil, true, unix.ENOENT, false},
	} {
		called := false
		end, err := answer(tc.m, tc.dump, func(nlMsg) error {
			called = true
			return tc.fnErr
		})
		if end != tc.wantEnd || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) || called != tc.called {
			t.Errorf("%s: end %v err %v called %v; want %v %v %v", tc.name, end, err, called, tc.wantEnd, tc.wantErr, tc.called)
		}
	}
}

func putErrno(code int32) []byte {
	b := make([]byte, 4)
	putNativeU32(b, uint32(code))
	return b
}

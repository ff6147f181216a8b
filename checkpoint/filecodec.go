package checkpoint

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"time"
)

// A file store file is a 16-byte header followed by a JSON payload:
//
//	offset 0  magic "FGCK"
//	offset 4  format version (1)
//	offset 5  kind: 1 stream, 2 coverage, 3 gaps, 4 pauses (an earlier
//	          version's), 5 provider record
//	offset 6  two reserved zero bytes
//	offset 8  payload length, uint32 big-endian
//	offset 12 CRC-32C (Castagnoli) of header bytes 0..11 and the payload
//
// The length catches truncation, the checksum catches torn writes and flipped
// bits anywhere (header included), and the record names inside the payload
// must hash to the file name, which catches swapped files. JSON keeps the
// files readable by an operator.
const (
	fileMagic   = "FGCK"
	fileFormat  = 1
	headerLen   = 16
	fileExt     = ".ckpt"
	gapsFile    = "gaps" + fileExt
	streamPre   = "stream-"
	coveragePre = "coverage-"
)

// The kinds of file.
const (
	kindStream   byte = 1
	kindCoverage byte = 2
	kindGaps     byte = 3
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordFile names the file of a stream or series: the prefix and the first
// 128 bits of the SHA-256 of the name, so any name yields a short, portable
// file name.
func recordFile(prefix, name string) string {
	sum := sha256.Sum256([]byte(name))
	return prefix + hex.EncodeToString(sum[:16]) + fileExt
}

// frame wraps payload in the header.
func frame(kind byte, payload []byte) []byte {
	buf := make([]byte, headerLen+len(payload))
	copy(buf, fileMagic)
	buf[4], buf[5] = fileFormat, kind
	binary.BigEndian.PutUint32(buf[8:], uint32(len(payload)))
	copy(buf[headerLen:], payload)
	sum := crc32.Update(crc32.Checksum(buf[:12], castagnoli), castagnoli, payload)
	binary.BigEndian.PutUint32(buf[12:], sum)
	return buf
}

// unframe checks the header and returns the payload, or why the file is
// corrupt.
func unframe(kind byte, data []byte) ([]byte, error) {
	if len(data) < headerLen {
		return nil, fmt.Errorf("%d bytes, shorter than the %d-byte header", len(data), headerLen)
	}
	if string(data[:4]) != fileMagic {
		return nil, fmt.Errorf("bad magic %q", data[:4])
	}
	payload := data[headerLen:]
	if n := binary.BigEndian.Uint32(data[8:]); int64(n) != int64(len(payload)) {
		return nil, fmt.Errorf("payload is %d bytes, header says %d (truncated or torn)", len(payload), n)
	}
	sum := crc32.Update(crc32.Checksum(data[:12], castagnoli), castagnoli, payload)
	if got := binary.BigEndian.Uint32(data[12:]); got != sum {
		return nil, fmt.Errorf("checksum mismatch (stored %08x, computed %08x)", got, sum)
	}
	// Checked after the checksum, so these only fire on files written by
	// another program or a future format.
	if data[4] != fileFormat {
		return nil, fmt.Errorf("unsupported format version %d", data[4])
	}
	if data[5] != kind || data[6] != 0 || data[7] != 0 {
		return nil, fmt.Errorf("kind %d, want %d", data[5], kind)
	}
	return payload, nil
}

// The JSON payloads.
type (
	streamRec struct {
		Stream      string          `json:"stream"`
		Checkpoints []checkpointRec `json:"checkpoints,omitempty"`
		Lease       *leaseRec       `json:"lease,omitempty"`
	}
	checkpointRec struct {
		Mode      Mode      `json:"mode"`
		Cursor    []byte    `json:"cursor"`
		Version   int64     `json:"version"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	leaseRec struct {
		Owner    string    `json:"owner"`
		Token    int64     `json:"token"`
		Expires  time.Time `json:"expires"`
		Released bool      `json:"released"`
	}
	coverageRec struct {
		Series string  `json:"series"`
		Ranges []Range `json:"ranges"`
	}
	gapsRec struct {
		LastID int64    `json:"last_id"`
		Gaps   []gapRec `json:"gaps"`
	}
	gapRec struct {
		ID      int64     `json:"id"`
		Stream  string    `json:"stream"`
		Mode    Mode      `json:"mode"`
		Cursor  []byte    `json:"cursor"`
		Range   Range     `json:"range"`
		Reason  string    `json:"reason"`
		Created time.Time `json:"created"`
	}
)

func encodeStream(name string, s streamState) ([]byte, error) {
	rec := streamRec{Stream: name}
	for _, m := range []Mode{CatchUp, SteadyState} {
		if cp := s.cps[m]; cp.Version > 0 {
			rec.Checkpoints = append(rec.Checkpoints, checkpointRec{m, cp.Cursor, cp.Version, cp.UpdatedAt})
		}
	}
	if s.lease.Token > 0 {
		rec.Lease = &leaseRec{s.lease.Owner, s.lease.Token, s.lease.Expires, s.released}
	}
	return marshal(kindStream, rec)
}

// maxCounter bounds a version or a lease token read from a file: far
// beyond what any store counts to (a commit a microsecond for 146,000
// years), and far enough from the int64 limit that the next one does not
// wrap. A file with a larger one was not written by a store (its checksum
// recomputed by hand): a version of MaxInt64 committed to -2^63, and the
// checkpoint was gone at the next open.
const maxCounter = 1 << 62

func decodeStream(file string, data []byte) (string, streamState, error) {
	var rec streamRec
	var s streamState
	if err := unmarshal(kindStream, data, &rec); err != nil {
		return "", s, err
	}
	if recordFile(streamPre, rec.Stream) != file {
		return "", s, fmt.Errorf("stream %q does not belong in this file", rec.Stream)
	}
	for _, c := range rec.Checkpoints {
		if !c.Mode.Valid() || c.Version <= 0 || c.Version > maxCounter || s.cps[c.Mode].Version != 0 {
			return "", s, fmt.Errorf("bad checkpoint record (mode %v, version %d)", c.Mode, c.Version)
		}
		s.cps[c.Mode] = Checkpoint{Key{rec.Stream, c.Mode}, c.Cursor, c.Version, c.UpdatedAt}
	}
	if l := rec.Lease; l != nil {
		if l.Token <= 0 || l.Token > maxCounter || l.Owner == "" {
			return "", s, fmt.Errorf("bad lease record (owner %q, token %d)", l.Owner, l.Token)
		}
		s.lease = Lease{rec.Stream, l.Owner, l.Token, l.Expires}
		s.released = l.Released
	}
	return rec.Stream, s, nil
}

func encodeCoverage(series string, c Coverage) ([]byte, error) {
	return marshal(kindCoverage, coverageRec{series, c.ranges})
}

func decodeCoverage(file string, data []byte) (string, Coverage, error) {
	var rec coverageRec
	if err := unmarshal(kindCoverage, data, &rec); err != nil {
		return "", Coverage{}, err
	}
	if recordFile(coveragePre, rec.Series) != file {
		return "", Coverage{}, fmt.Errorf("series %q does not belong in this file", rec.Series)
	}
	for i, r := range rec.Ranges {
		if r.Empty() || (i > 0 && !rec.Ranges[i-1].End.Before(r.Start)) {
			return "", Coverage{}, fmt.Errorf("range %d %v is empty, unsorted or touches its predecessor", i, r)
		}
	}
	return rec.Series, Coverage{ranges: rec.Ranges}, nil
}

func encodeGaps(lastID int64, open []Gap) ([]byte, error) {
	rec := gapsRec{LastID: lastID, Gaps: make([]gapRec, len(open))}
	for i, g := range open {
		rec.Gaps[i] = gapRec{g.ID, g.Key.Stream, g.Key.Mode, g.Cursor, g.Range, g.Reason, g.Created}
	}
	return marshal(kindGaps, rec)
}

func decodeGaps(data []byte) (int64, []Gap, error) {
	var rec gapsRec
	if err := unmarshal(kindGaps, data, &rec); err != nil {
		return 0, nil, err
	}
	open := make([]Gap, len(rec.Gaps))
	var prev int64
	for i, g := range rec.Gaps {
		open[i] = Gap{g.ID, Key{g.Stream, g.Mode}, g.Cursor, g.Range, g.Reason, g.Created}
		if g.ID <= prev || g.ID > rec.LastID || checkStoredGap(open[i]) != nil {
			return 0, nil, fmt.Errorf("bad gap record %d (id %d, last id %d)", i, g.ID, rec.LastID)
		}
		prev = g.ID
	}
	return rec.LastID, open, nil
}

func marshal(kind byte, v any) ([]byte, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: encoding: %w", err)
	}
	return frame(kind, payload), nil
}

func unmarshal(kind byte, data []byte, v any) error {
	payload, err := unframe(kind, data)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	return nil
}

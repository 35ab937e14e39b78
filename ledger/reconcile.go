package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// Bounds of the start-up reconciliation of the file with the mirror.
const (
	// reconcileRows is how many of the newest regular mirror rows the tail
	// of the file is compared with. A crash leaves one batch uncommitted,
	// after the lines of the batches committed before it.
	reconcileRows = 4096
	// reconcileChunk is how much of the file is read at a time, backwards
	// from its end, and reconcileMaxScan how far back from its end the
	// last committed line is looked for.
	reconcileChunk   = 1 << 20
	reconcileMaxScan = 64 << 20
)

// crashReason is the reason of the voided records that reconcile appends.
const crashReason = "not committed before a crash"

// tailLine is one line of the end of the file, without its newline.
type tailLine struct {
	body     []byte
	complete bool // ends in a newline; a crash mid-write leaves a torn last line
}

// lineInfo is what reconcile reads of a line.
type lineInfo struct {
	Event      string `json:"event"`
	Degraded   bool   `json:"degraded"`
	LineSHA256 string `json:"line_sha256"`
	DecisionID string `json:"decision_id"`
}

// reconcile voids, at start-up, the lines a crash left in the file without
// their batch being committed: a kill between the file's write and the
// mirror's commit leaves the lines of a batch that was neither committed
// nor answered, which would otherwise read as decisions that happened (an
// allow, a consumed hold). Batches are committed one after the other, so
// such lines follow the last committed one: reconcile reads the file
// backwards from its end to the last line the mirror holds among its
// newest regular rows, and appends one voided record (reason crashReason)
// for each line after it that is not one of the records a batch never
// mirrors (voided records, degraded records) or already voided. A torn
// last line is voided too.
//
// With no committed line in the file, every line is after the last
// committed one if the mirror holds no regular row; when it does, the file
// holds none of the mirror's newest rows (it was rotated away, or replaced)
// and its lines are taken as written since. A database created by this
// start (Created) mirrors nothing of an older file, which is left as it is.
// reconcile gives up, logging why, when the last committed line is not
// within reconcileMaxScan of the end of the file.
func (a *Audit) reconcile(ctx context.Context) error {
	if a.db.Created() {
		return nil
	}
	known, err := a.newestRows(ctx)
	if err != nil {
		return fmt.Errorf("reconcile audit log %s: %w", a.file.path, err)
	}
	lines, whole, err := readTail(a.file.path, known)
	if err != nil {
		return fmt.Errorf("reconcile audit log %s: %w", a.file.path, err)
	}
	if !whole {
		a.log.Error().Str("path", a.file.path).Int("mib", reconcileMaxScan>>20).
			Msg("audit log: no committed record near the end of the file; lines a crash left uncommitted, if any, are not voided")
		return nil
	}
	stray := uncommitted(lines)
	if len(stray) == 0 {
		return nil
	}
	return a.voidStray(stray)
}

// newestRows returns the hashes of the bodies of the newest reconcileRows
// mirror rows that are not degraded records (a degraded record may be in
// the mirror alone).
func (a *Audit) newestRows(ctx context.Context) (map[[sha256.Size]byte]bool, error) {
	rows, err := a.db.db.QueryContext(ctx, `SELECT body FROM audit
		WHERE body NOT LIKE '%"degraded":true%' ORDER BY seq DESC LIMIT ?`, reconcileRows)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	known := map[[sha256.Size]byte]bool{}
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		known[sha256.Sum256(body)] = true
	}
	return known, rows.Err()
}

// readTail returns the lines of the file at path after the last one whose
// hash is in known (all of them when none is), reading backwards from the
// end, and whether it found that line or read the whole file, within
// reconcileMaxScan of the end.
func readTail(path string, known map[[sha256.Size]byte]bool) ([]tailLine, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = f.Close() }()
	fi, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	end := fi.Size()
	var buf []byte // the file from end-len(buf) to its end
	for {
		start := max(end-int64(len(buf))-reconcileChunk, 0)
		chunk := make([]byte, end-int64(len(buf))-start)
		if _, err := f.ReadAt(chunk, start); err != nil && err != io.EOF {
			return nil, false, err
		}
		buf = append(chunk, buf...)
		lines, found := linesAfter(buf, start == 0, known)
		switch {
		case found || start == 0:
			return lines, true, nil
		case int64(len(buf)) >= reconcileMaxScan:
			return nil, false, nil
		}
	}
}

// linesAfter splits buf, the end of the file (all of it when whole), into
// lines and returns those after the last line whose hash is in known, and
// whether there is one. The first line of buf is left out unless whole,
// being possibly cut.
func linesAfter(buf []byte, whole bool, known map[[sha256.Size]byte]bool) ([]tailLine, bool) {
	var out []tailLine
	rest := buf
	if len(rest) > 0 && rest[len(rest)-1] != '\n' { // a torn last line
		i := bytes.LastIndexByte(rest, '\n')
		out = append(out, tailLine{body: rest[i+1:]})
		rest = rest[:i+1]
	}
	rest = bytes.TrimSuffix(rest, []byte{'\n'})
	for len(rest) > 0 {
		i := bytes.LastIndexByte(rest, '\n')
		if i < 0 && !whole {
			break
		}
		body := rest[i+1:]
		if known[sha256.Sum256(body)] {
			return reversed(out), true
		}
		out = append(out, tailLine{body: body, complete: true})
		rest = rest[:max(i, 0)]
	}
	return reversed(out), false
}

func reversed(lines []tailLine) []tailLine {
	for i, j := 0, len(lines)-1; i < j; i, j = i+1, j-1 {
		lines[i], lines[j] = lines[j], lines[i]
	}
	return lines
}

// uncommitted returns the lines, after the last committed one, that a
// batch would have committed: not voided records, degraded records, or
// lines a voided record names, nor empty lines. A torn line is one.
func uncommitted(lines []tailLine) []tailLine {
	voided := map[string]bool{}
	for _, l := range lines {
		var info lineInfo
		if l.complete && json.Unmarshal(l.body, &info) == nil && info.Event == KindVoided {
			voided[info.LineSHA256] = true
		}
	}
	var out []tailLine
	for _, l := range lines {
		var info lineInfo
		sum := sha256.Sum256(l.body)
		switch {
		case len(bytes.TrimSpace(l.body)) == 0 || voided[hex.EncodeToString(sum[:])]:
		case l.complete && json.Unmarshal(l.body, &info) == nil && (info.Event == KindVoided || info.Degraded):
		default:
			out = append(out, l)
		}
	}
	return out
}

// voidStray appends, and syncs, a voided record for each line of stray.
func (a *Audit) voidStray(stray []tailLine) error {
	ts := nowStamp(a.db)
	var buf bytes.Buffer
	var ids []string
	for _, l := range stray {
		var info lineInfo
		_ = json.Unmarshal(l.body, &info) // a torn line has neither event nor id
		buf.Write(voidedLine(ts, info.Event, info.DecisionID, l.body, crashReason))
		if info.DecisionID != "" {
			ids = append(ids, info.DecisionID)
		}
	}
	if _, err := a.file.write(buf.Bytes(), true); err != nil {
		return fmt.Errorf("void the lines a crash left uncommitted: %w", err)
	}
	a.log.Warn().Int("lines", len(stray)).Strs("decision_ids", ids).Str("path", a.file.path).
		Msg("audit log: lines of a batch not committed before a crash were voided")
	return nil
}

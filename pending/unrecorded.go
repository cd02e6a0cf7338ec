package pending

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// When an outcome cannot be committed (a full disk, a write lock held past
// the busy timeout), the call stays in_flight in the file, and the next
// recovery turns it unknown. So that recovery can say why, the owner notes
// the call and the reason in its own lock file, which needs no SQLite
// write: the file's first block is allocated when the lock is taken
// (ownerNoteSpace), so on a full disk the note still fits.

// ownerNoteSpace is the room kept in an owner's lock file for notes.
const ownerNoteSpace = 4096

// ReasonNotRecorded prefixes the reason of a call recovered after its
// owner could not record the outcome.
const ReasonNotRecorded = "outcome not recorded: "

type unrecordedNote struct {
	Call int64  `json:"call"`
	Why  string `json:"why"`
}

// NoteUnrecorded records, outside SQLite, that call id's outcome could not
// be committed and why. Best effort: the call is unknown either way.
func (j *Journal) NoteUnrecorded(id int64, err error) {
	if j.owner == nil {
		return
	}
	why := "no reason given"
	if err != nil {
		why = err.Error()
	}
	if len(why) > 300 {
		why = why[:300] + "…"
	}
	line, _ := json.Marshal(unrecordedNote{Call: id, Why: why})
	line = append(line, '\n')
	j.noteMu.Lock()
	defer j.noteMu.Unlock()
	if j.noteOff+int64(len(line)) > ownerNoteSpace {
		return // the room is full; the generic recovery reason will do
	}
	if j.owner.writeNote(line, j.noteOff) == nil {
		j.noteOff += int64(len(line))
	}
}

// prepareNoteSpace fills the lock file's note room with newlines, so that
// a later note overwrites allocated blocks instead of needing new ones.
func prepareNoteSpace(f *os.File) error {
	_, err := f.WriteAt(bytes.Repeat([]byte{'\n'}, ownerNoteSpace), 0)
	return err
}

// readUnrecorded reads a dead owner's notes: the reason for each call whose
// outcome it could not record.
func readUnrecorded(path string) map[int64]string {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	out := map[int64]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var n unrecordedNote
		if json.Unmarshal([]byte(line), &n) == nil && n.Call != 0 {
			out[n.Call] = fmt.Sprint(ReasonNotRecorded, n.Why)
		}
	}
	return out
}

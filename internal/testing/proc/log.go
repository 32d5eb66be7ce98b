package proc

import (
	"bytes"
	"fmt"
	"io"
	"os"
)

// LogTail returns the last n bytes of the process's log, for a failure
// message; if the log cannot be read, it says why instead.
func (p *Process) LogTail(n int64) string { return FileTail(p.log, n) }

// FileTail returns the last n bytes of the file at path, for a failure
// message; if the file cannot be read, it says why instead.
func FileTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err == nil && info.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return fmt.Sprintf("(log unreadable: %v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(log unreadable: %v)", err)
	}
	return string(b)
}

// lines copies one output stream to the log and, line by line, to a
// callback. os/exec writes to it from one goroutine, and Wait returns
// only after the last write.
type lines struct {
	log     *os.File
	onLine  func(string)
	partial []byte
}

func newLines(log *os.File, onLine func(string)) *lines {
	return &lines{log: log, onLine: onLine}
}

// writer is what the stream is written to: the log file itself when there
// is no callback, so the child writes to it directly.
func (l *lines) writer() io.Writer {
	if l.onLine == nil {
		return l.log
	}
	return l
}

func (l *lines) Write(b []byte) (int, error) {
	n, err := l.log.Write(b)
	if err != nil {
		return n, fmt.Errorf("proc: log: %w", err)
	}
	l.partial = append(l.partial, b...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return n, nil
		}
		l.onLine(string(l.partial[:i]))
		l.partial = l.partial[i+1:]
	}
}

// flush delivers a last line that has no newline.
func (l *lines) flush() {
	if l.onLine != nil && len(l.partial) > 0 {
		l.onLine(string(l.partial))
		l.partial = nil
	}
}

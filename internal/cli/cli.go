// Package cli holds what the redislock subcommands share on their command
// line: usage errors, which exit 2 as Go's flag package has them do, flag
// parsing that reports a bad flag in one line, and the log flags.
package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// ErrUsage is matched (errors.Is) by the errors of a command line that
// cannot run as given: an unknown flag, a missing or invalid value. The
// command exits 2 for them, before it connects to anything.
var ErrUsage = errors.New("cli: usage error")

// usageError marks err as a usage error without changing its message.
type usageError struct{ err error }

func (u usageError) Error() string        { return u.err.Error() }
func (u usageError) Unwrap() error        { return u.err }
func (u usageError) Is(target error) bool { return target == ErrUsage }

// Usage returns err marked as a usage error (nil for nil).
func Usage(err error) error {
	if err == nil {
		return nil
	}
	return usageError{err}
}

// Usagef is Usage(fmt.Errorf(format, args...)).
func Usagef(format string, args ...any) error {
	return Usage(fmt.Errorf(format, args...))
}

// Parse parses args with fs, which must be flag.ContinueOnError. With -h it
// prints fs's usage and returns flag.ErrHelp. A bad flag gives a usage
// error of one line, "<command>: <what is wrong> (redislock <command> -h
// lists its flags)", instead of the flag package's message and the whole
// flag list.
func Parse(fs *flag.FlagSet, args []string) error {
	out := fs.Output()
	var buf bytes.Buffer
	fs.SetOutput(&buf)
	err := fs.Parse(args)
	fs.SetOutput(out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		// Asked for, the flags are the output: stdout, unless the
		// caller chose where they go.
		if out == os.Stderr {
			fs.SetOutput(os.Stdout)
			defer fs.SetOutput(out)
		}
		fs.Usage()
		return err
	}
	return Usagef("%s: %w (redislock %s -h lists its flags)", fs.Name(), err, fs.Name())
}

// LogFlags are the zap flags of controller-runtime (-zap-log-level and
// the rest), with stack traces only from DPanic up: retries and refusals
// that a command logs as errors are not defects, and a stack trace on each
// buries the reason.
type LogFlags struct{ o zap.Options }

// BindLogFlags adds the log flags to fs.
func BindLogFlags(fs *flag.FlagSet) *LogFlags {
	l := &LogFlags{o: zap.Options{StacktraceLevel: zapcore.DPanicLevel}}
	l.o.BindFlags(fs)
	return l
}

// Logger returns the logger the flags describe, after making it
// controller-runtime's.
func (l *LogFlags) Logger() logr.Logger {
	log := zap.New(zap.UseFlagOptions(&l.o))
	ctrl.SetLogger(log)
	return log
}

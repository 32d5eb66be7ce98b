// Package proc runs the child processes of tests, benchmarks and the demo:
// the one way this repository starts, watches and stops a program.
//
// What is guaranteed, on Linux:
//  1. A started process dies with the process that started it (the parent
//     death signal is SIGKILL), even when that one is killed itself.
//  2. It runs in its own process group, and every signal goes to the whole
//     group: a shell's children are stopped, continued and killed with it,
//     and a Ctrl-C at the terminal reaches only the parent, which stops its
//     children itself.
//  3. Its stdout and stderr are appended to one log file, and each line of
//     either can also go to a callback; every line has been delivered when
//     Done is closed.
//  4. Stop ends it within its grace period plus the time a SIGKILL takes.
//
// What is not: a process that forks and leaves its group, or clears its
// parent death signal, can outlive the parent.
package proc

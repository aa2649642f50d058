// main.go - the process: its flags and the JSON control protocol on stdin/stdout. See doc.go.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
)

// codeNames are the grpc.StatusCode names the protocol reports.
var codeNames = map[codes.Code]string{
	codes.OK: "OK", codes.Canceled: "CANCELLED", codes.Unknown: "UNKNOWN",
	codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED",
	codes.NotFound: "NOT_FOUND", codes.AlreadyExists: "ALREADY_EXISTS",
	codes.PermissionDenied: "PERMISSION_DENIED", codes.ResourceExhausted: "RESOURCE_EXHAUSTED",
	codes.FailedPrecondition: "FAILED_PRECONDITION", codes.Aborted: "ABORTED",
	codes.OutOfRange: "OUT_OF_RANGE", codes.Unimplemented: "UNIMPLEMENTED", codes.Internal: "INTERNAL",
	codes.Unavailable: "UNAVAILABLE", codes.DataLoss: "DATA_LOSS", codes.Unauthenticated: "UNAUTHENTICATED",
}

func codeName(c codes.Code) string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "UNKNOWN"
}

// argError is a command with missing or malformed arguments (the Python fake's ValueError/KeyError).
type argError struct{ msg string }

func (e argError) Error() string { return e.msg }

func errorText(err error) string {
	var t timeoutError
	var a argError
	switch {
	case errors.As(err, &t):
		return "TimeoutError: " + err.Error()
	case errors.As(err, &a):
		return "ValueError: " + err.Error()
	}
	return "Error: " + err.Error()
}

type emitter struct {
	mu sync.Mutex
	w  io.Writer
}

func (e *emitter) emit(obj any) {
	b, err := json.Marshal(obj)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"id": nil, "ok": false, "error": "Error: " + err.Error()})
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.w.Write(append(b, '\n'))
}

// decode reads a command's arguments into v; unknown ones are refused when strict.
func decode(args map[string]json.RawMessage, v any, strict bool) error {
	b, _ := json.Marshal(args)
	dec := json.NewDecoder(bytes.NewReader(b))
	if strict {
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		return argError{err.Error()}
	}
	return nil
}

// handle runs one command and emits its reply; done is closed by quit.
func (k *kubelet) handle(msg map[string]json.RawMessage, out *emitter, quit func()) {
	id := msg["id"]
	if id == nil {
		id = json.RawMessage("null")
	}
	var cmd string
	_ = json.Unmarshal(msg["cmd"], &cmd)
	args := map[string]json.RawMessage{}
	for key, v := range msg {
		if key != "id" && key != "cmd" && key != "timeout" {
			args[key] = v
		}
	}
	timeout := 10.0
	if t, ok := msg["timeout"]; ok {
		if err := json.Unmarshal(t, &timeout); err != nil {
			out.emit(map[string]any{"id": id, "ok": false, "error": "ValueError: timeout must be a number"})
			return
		}
	}
	reply, err := k.run(cmd, args, timeout, out, id, quit)
	if reply == nil && err == nil {
		return // replied already
	}
	if err != nil {
		out.emit(map[string]any{"id": id, "ok": false, "error": errorText(err)})
		return
	}
	reply["id"], reply["ok"] = id, true
	out.emit(reply)
}

func (k *kubelet) run(cmd string, args map[string]json.RawMessage, timeout float64, out *emitter,
	id json.RawMessage, quit func()) (map[string]any, error) {
	var w struct {
		Resource *string `json:"resource"`
		Count    *int    `json:"count"`
		N        *int    `json:"n"`
		After    *int    `json:"after"`
	}
	waitFor := func(pred func(*resState) bool, what string) (map[string]any, error) {
		st, err := k.wait(*w.Resource, pred, timeout, what)
		if err != nil {
			return nil, err
		}
		return map[string]any{"resource": st}, nil
	}
	switch cmd {
	case "wait_registered", "wait_healthy", "wait_update", "wait_disconnected":
		if err := decode(args, &w, false); err != nil {
			return nil, err
		}
		if w.Resource == nil {
			return nil, argError{cmd + " needs resource"}
		}
	}
	switch cmd {
	case "state":
		return k.state(), nil
	case "wait_registered":
		count := 1
		if w.Count != nil {
			count = *w.Count
		}
		return waitFor(func(s *resState) bool { return s.Registrations >= count },
			fmt.Sprintf("registration %d", count))
	case "wait_healthy":
		if w.N == nil {
			return nil, argError{"wait_healthy needs n"}
		}
		n := *w.N
		return waitFor(func(s *resState) bool { return s.Allocatable == n }, fmt.Sprintf("%d healthy devices", n))
	case "wait_update":
		after := 0
		if w.After != nil {
			after = *w.After
		}
		return waitFor(func(s *resState) bool { return s.Updates > after }, fmt.Sprintf("update > %d", after))
	case "wait_disconnected":
		return waitFor(func(s *resState) bool { return !s.Registered && s.Registrations > 0 },
			"the end of ListAndWatch")
	case "allocate":
		var a allocArgs
		if err := decode(args, &a, true); err != nil {
			return nil, err
		}
		reply, err := k.allocate(a)
		if err != nil {
			return nil, argError{err.Error()}
		}
		reply["id"] = id
		out.emit(reply)
		return nil, nil
	case "release":
		var r struct {
			Namespace *string `json:"namespace"`
			Pod       *string `json:"pod"`
		}
		if err := decode(args, &r, false); err != nil {
			return nil, err
		}
		if r.Namespace == nil || r.Pod == nil {
			return nil, argError{"release needs namespace and pod"}
		}
		k.release(*r.Namespace, *r.Pod)
		return map[string]any{}, nil
	case "set_pods":
		raw, ok := args["pods"]
		if !ok {
			return nil, argError{"set_pods needs pods"}
		}
		pods, err := parsePods(raw)
		if err != nil {
			return nil, argError{"pods: " + err.Error()}
		}
		k.setPods(pods)
		return map[string]any{}, nil
	case "restart":
		var r struct {
			CleanupDelay float64 `json:"cleanup_delay"`
		}
		if err := decode(args, &r, true); err != nil {
			return nil, err
		}
		if err := k.restart(time.Duration(r.CleanupDelay * float64(time.Second))); err != nil {
			return nil, err
		}
		return map[string]any{}, nil
	case "quit":
		out.emit(map[string]any{"id": id, "ok": true})
		quit()
		return nil, nil
	}
	c, _ := json.Marshal(cmd)
	return nil, argError{"unknown command " + string(c)}
}

func main() {
	fs := flag.NewFlagSet("fake-kubelet-go", flag.ExitOnError)
	pluginDir := fs.String("plugin-dir", "", "the device-plugin directory (kubelet.sock, plugin sockets, checkpoint)")
	podresDir := fs.String("podres-dir", "", "the pod-resources directory (kubelet.sock); none without it")
	dialTimeout := fs.Float64("dial-timeout", 10, "seconds the dial-back to a registering plugin may take")
	noRateLimit := fs.Bool("no-rate-limit", false, "serve pod-resources without the kubelet's rate limiter")
	_ = fs.Parse(os.Args[1:])
	if *pluginDir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: fake-kubelet-go --plugin-dir D [--podres-dir P] [--dial-timeout S] [--no-rate-limit]")
		os.Exit(2)
	}
	pd, err := filepath.Abs(*pluginDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	prd := ""
	if *podresDir != "" {
		if prd, err = filepath.Abs(*podresDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	k := newKubelet(pd, prd, time.Duration(*dialTimeout*float64(time.Second)), !*noRateLimit)
	if err := k.start(0); err != nil {
		fmt.Fprintln(os.Stderr, "fake-kubelet-go:", err)
		os.Exit(1)
	}
	out := &emitter{w: os.Stdout}
	var podres any
	if prd != "" {
		podres = k.podresSocket()
	}
	out.emit(map[string]any{"event": "ready", "impl": "grpc-go", "kubelet_socket": k.kubeletSocket(),
		"podres_socket": podres})

	done := make(chan struct{})
	var once sync.Once
	quit := func() { once.Do(func() { close(done) }) }
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			line, err := r.ReadBytes('\n')
			if len(bytes.TrimSpace(line)) > 0 {
				var msg map[string]json.RawMessage
				if jerr := json.Unmarshal(line, &msg); jerr != nil {
					out.emit(map[string]any{"id": nil, "ok": false, "error": "bad JSON: " + jerr.Error()})
				} else {
					go k.handle(msg, out, quit)
				}
			}
			if err != nil {
				quit()
				return
			}
		}
	}()
	<-done
	k.stop()
	out.mu.Lock() // no reply is cut in half by the exit
	os.Exit(0)
}

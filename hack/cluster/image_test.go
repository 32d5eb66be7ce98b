package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The archive is an OCI image layout whose every blob is named by its
// digest, whose index names the image the way `ctr images import` reads
// it, and whose one layer holds the binary at /<name>, executable.
func TestOCIArchiveIsAValidImageLayout(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "redislock")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "image.tar")
	img := image{ref: "ghcr.io/redislock/redislock:v9.9.9", binary: bin, entrypoint: []string{"/redislock"}, user: "65532:65532"}
	if err := writeOCIArchive(img, out); err != nil {
		t.Fatal(err)
	}
	files := untar(t, mustRead(t, out))
	if got := string(files["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Fatalf("oci-layout: %s", got)
	}
	for name, data := range files {
		if strings.HasPrefix(name, "blobs/") && blobPath(data) != name {
			t.Errorf("%s holds a blob whose digest is %s", name, digest(data))
		}
	}
	var index struct {
		Manifests []ociDescriptor `json:"manifests"`
	}
	mustUnmarshal(t, files["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["io.containerd.image.name"] != img.ref ||
		index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "v9.9.9" {
		t.Fatalf("index: %+v", index)
	}
	var manifest struct {
		Config ociDescriptor   `json:"config"`
		Layers []ociDescriptor `json:"layers"`
	}
	mustUnmarshal(t, files["blobs/sha256/"+strings.TrimPrefix(index.Manifests[0].Digest, "sha256:")], &manifest)
	var config struct {
		Config struct {
			Entrypoint []string
			User       string
		} `json:"config"`
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	mustUnmarshal(t, files["blobs/sha256/"+strings.TrimPrefix(manifest.Config.Digest, "sha256:")], &config)
	if len(manifest.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != manifest.Layers[0].Digest {
		t.Fatalf("layers %+v, diff_ids %v: want one uncompressed layer named in both", manifest.Layers, config.RootFS.DiffIDs)
	}
	if config.Config.User != "65532:65532" || strings.Join(config.Config.Entrypoint, " ") != "/redislock" {
		t.Fatalf("config: %+v", config.Config)
	}
	layer := untarHeaders(t, files["blobs/sha256/"+strings.TrimPrefix(manifest.Layers[0].Digest, "sha256:")])
	if h := layer["redislock"]; h == nil || h.Mode&0o111 == 0 {
		t.Fatalf("the layer has no executable /redislock: %v", h)
	}
	if h := layer["tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Fatalf("the layer has no world-writable /tmp: %v", h)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustUnmarshal(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
}

func untar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	r := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		files[h.Name] = data
	}
}

func untarHeaders(t *testing.T, b []byte) map[string]*tar.Header {
	t.Helper()
	headers := map[string]*tar.Header{}
	r := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			return headers
		}
		if err != nil {
			t.Fatal(err)
		}
		headers[h.Name] = h
	}
}

// The python image holds all python3 needs: its layer, unpacked alone
// (nothing of the host's filesystem), runs the standard library modules
// examples/python-worker imports, as the image's user.
func TestPythonImageRunsOnItsOwn(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chroot needs root, as hack/cluster does")
	}
	files, err := pythonFiles(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	layer, err := layerTar(image{host: files})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	r := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, h.Name)
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, os.FileMode(h.Mode)&os.ModePerm); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, os.FileMode(h.Mode)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "chroot", "--userspec=65532:65532", root, "/usr/bin/python3", "-c",
		"import json, os, signal, sys, time, urllib.request; print('ok', sys.prefix)").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok /usr" {
		t.Fatalf("python3 in the image's layer alone: %v\n%s", err, out)
	}
}

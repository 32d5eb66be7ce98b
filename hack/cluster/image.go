package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/redislock/redislock/internal/testing/proc"
)

// image is a one-layer image: a static binary at /<name>, an /etc/passwd
// naming nonroot (65532), and a world-writable /tmp, like distroless/static
// that the Dockerfile builds on.
type image struct {
	ref    string // full name: registry/repository:tag
	binary string // the file to put at /<base name of binary>, if any
	// host are files of the host (symlinks followed), each put at its own
	// path, and env the image's environment (default PATH=/).
	host       []string
	env        []string
	entrypoint []string
	user       string
}

// ociDescriptor, as the OCI image spec defines it.
type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    map[string]string `json:"platform,omitempty"`
}

// writeOCIArchive writes img as an OCI image layout in a tar at out, the
// form `ctr images import` reads.
func writeOCIArchive(img image, out string) error {
	layer, err := layerTar(img)
	if err != nil {
		return err
	}
	env := img.env
	if env == nil {
		env = []string{"PATH=/"}
	}
	layerDigest := digest(layer)
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Entrypoint": img.entrypoint,
			"User":       img.user,
			"Env":        env,
		},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        ociDescriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digest(config), Size: int64(len(config))},
		"layers":        []ociDescriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar", Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return err
	}
	tag := img.ref[strings.LastIndex(img.ref, ":")+1:]
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []ociDescriptor{{
			MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digest(manifest), Size: int64(len(manifest)),
			Annotations: map[string]string{"io.containerd.image.name": img.ref, "org.opencontainers.image.ref.name": tag},
			Platform:    map[string]string{"architecture": "amd64", "os": "linux"},
		}},
	})
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	files := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
		{blobPath(layer), layer},
	}
	for _, f := range files {
		if err := addFile(w, f.name, 0o644, f.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, buf.Bytes(), 0o644)
}

// layerTar is the image's one layer.
func layerTar(img image) ([]byte, error) {
	var buf bytes.Buffer
	w := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, dir := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"tmp/", 0o1777}} {
		dirs[strings.TrimSuffix(dir.name, "/")] = true
		if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir.name, Mode: dir.mode, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
	}
	if err := addFile(w, "etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")); err != nil {
		return nil, err
	}
	if err := addFile(w, "etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")); err != nil {
		return nil, err
	}
	if img.binary != "" {
		bin, err := os.ReadFile(img.binary)
		if err != nil {
			return nil, err
		}
		if err := addFile(w, filepath.Base(img.binary), 0o755, bin); err != nil {
			return nil, err
		}
	}
	for _, f := range img.host {
		name := strings.TrimPrefix(filepath.Clean(f), "/")
		if err := addParents(w, dirs, filepath.Dir(name)); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(f)
		if err != nil {
			return nil, err
		}
		if err := addFile(w, name, int64(fi.Mode().Perm()), data); err != nil {
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// addParents writes the directory dir and those above it that the layer
// lacks.
func addParents(w *tar.Writer, have map[string]bool, dir string) error {
	if dir == "." || dir == "" || have[dir] {
		return nil
	}
	if err := addParents(w, have, filepath.Dir(dir)); err != nil {
		return err
	}
	have[dir] = true
	return w.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: time.Unix(0, 0)})
}

func addFile(w *tar.Writer, name string, mode int64, data []byte) error {
	if err := w.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	_, err := w.Write(data)
	return err
}

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(b []byte) string { return "blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:") }

// buildImages builds the product binary from the repository's main package
// and the pause program, both static, and writes the three archives up
// imports: the product's (named productRef), the pause image and the app
// image.
func buildImages(ctx context.Context, root string, d dirs, productRef string) ([]string, error) {
	out := d.path("images")
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	for _, b := range []struct{ pkg, bin string }{{".", "redislock"}, {"./hack/cluster/pause", "pause"}} {
		err := proc.Run(ctx, proc.Options{
			Name: "go build " + b.pkg, Path: "go", Log: d.log("go-build"),
			Args: []string{"-C", root, "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(out, b.bin), b.pkg},
			Env:  []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"},
		})
		if err != nil {
			return nil, err
		}
	}
	images := []image{
		{ref: productRef, binary: filepath.Join(out, "redislock"), entrypoint: []string{"/redislock"}, user: "65532:65532"},
		{ref: pauseImage, binary: filepath.Join(out, "pause"), entrypoint: []string{"/pause"}, user: "65532:65532"},
		{ref: appImage, binary: filepath.Join(out, "pause"), entrypoint: []string{"/pause"}, user: "65532:65532"},
	}
	py, err := pythonFiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", pythonImage, err)
	}
	images = append(images, image{ref: pythonImage, host: py, env: []string{"PATH=/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE=1"}, entrypoint: []string{"/usr/bin/python3"}, user: "65532:65532"})
	var archives []string
	for _, img := range images {
		a := filepath.Join(out, strings.NewReplacer("/", "_", ":", "_").Replace(img.ref)+".tar")
		if err := writeOCIArchive(img, a); err != nil {
			return nil, fmt.Errorf("image %s: %w", img.ref, err)
		}
		archives = append(archives, a)
	}
	return archives, nil
}

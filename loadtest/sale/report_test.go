package sale

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func writeRecordedReport(t *testing.T) []byte {
	t.Helper()
	h := recordedSale()
	var b bytes.Buffer
	if err := WriteReport(&b, h, Summarize(h, Judge(h))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// fetches are the ways a page asks for another resource: an element's src or href, CSS url()
// or @import.
var fetches = regexp.MustCompile(`(?i)(src|href)\s*=|url\s*\(|@import`)

func TestReportFetchesNothing(t *testing.T) {
	page := string(writeRecordedReport(t))
	if m := fetches.FindAllString(page, -1); len(m) > 0 {
		t.Errorf("the report refers to other resources: %q", m)
	}
	if strings.Contains(page, "http://") && strings.Count(page, "http://") != strings.Count(page, "http://127.0.0.1:8081") {
		t.Errorf("the report names an http:// address other than the target")
	}
	if strings.Contains(page, "https://") || strings.Contains(page, "<script") {
		t.Error("the report has an https:// address or a script")
	}
	for _, want := range []string{"Verdict: PASS", "sold out at", "<polyline", "p99", "409 OUT_OF_STOCK", "regrants", "due after the sell-out"} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
}

// TestReportRendersInChromium opens the report of a recorded sale in headless Chromium and
// checks that the screenshot is not one flat colour.
func TestReportRendersInChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no chromium binary on PATH: install Debian's chromium (apt-get install chromium) to render the report")
	}
	dir := t.TempDir()
	page, shot := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.png")
	if err := os.WriteFile(page, writeRecordedReport(t), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+filepath.Join(dir, "profile"),
		"--screenshot="+shot, "--window-size=1024,1400", "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("decode the screenshot: %v", err)
	}
	if colours := distinctColours(img, 50); colours < 10 {
		t.Errorf("the screenshot has %d colours: blank", colours)
	}
}

// distinctColours counts the colours of img, up to limit.
func distinctColours(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return len(seen)
			}
		}
	}
	return len(seen)
}

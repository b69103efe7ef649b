package cli

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressEvery is how many tasks, or how long, a bulk command lets pass
// between two progress lines.
const (
	progressEvery    = 1000
	progressInterval = time.Second
)

// progress tells on stderr how far a bulk command has got: a line each
// time the total passes a multiple of progressEvery, and one each
// progressInterval in which it grew, so that a long run shows it is alive
// without flooding the terminal. The time is kept by a ticker of its own,
// not by the calls' answers: a run of one slow call tells nothing but its
// total.
type progress struct {
	w    io.Writer
	verb string // "redriven", "cancelled"

	mu             sync.Mutex
	done, lastDone int // the total so far, and at the last line

	stop chan struct{}
	wg   sync.WaitGroup
}

func newProgress(w io.Writer, verb string) *progress {
	return &progress{w: w, verb: verb, stop: make(chan struct{})}
}

// start starts the ticker; end stops it.
func (p *progress) start() {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.tick()
			}
		}
	}()
}

func (p *progress) end() {
	close(p.stop)
	p.wg.Wait()
}

// report is told the running total after each step of the run.
func (p *progress) report(done int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = done
	if done/progressEvery > p.lastDone/progressEvery {
		p.line()
	}
}

// tick tells the total if it grew since the last line.
func (p *progress) tick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done > p.lastDone {
		p.line()
	}
}

func (p *progress) line() {
	p.lastDone = p.done
	fmt.Fprintf(p.w, "%s %d …\n", p.verb, p.done)
}

package benchmarks_test

import "testing"

func succeed() error { return nil }

func BenchmarkSuccess(b *testing.B) {
	for _, c := range contenders {
		b.Run("lib="+c.name, func(b *testing.B) {
			run := c.typical(succeed)
			b.ReportAllocs()
			for b.Loop() {
				if err := run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkTwoFailures(b *testing.B) {
	for _, c := range contenders {
		b.Run("lib="+c.name, func(b *testing.B) {
			f := &flaky{fails: 2}
			run := c.zeroDelay(f.call)
			b.ReportAllocs()
			for b.Loop() {
				f.calls = 0
				if err := run(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkDelays(b *testing.B) {
	for _, d := range delayers {
		b.Run("lib="+d.name, func(b *testing.B) {
			next := d.prepare()
			b.ReportAllocs()
			var sink int64
			for b.Loop() {
				for _, v := range next() {
					sink += int64(v)
				}
			}
			if sink < 0 {
				b.Fatal("negative delays")
			}
		})
	}
}

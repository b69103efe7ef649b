package sqlite

import "context"

// WriteForTest queues f as one write operation, as the Store's methods do;
// exec runs a statement in the operation's transaction. It lets tests make
// an operation fail after writing, which no method does on purpose.
func (s *Store) WriteForTest(ctx context.Context, f func(exec func(query string, args ...any) error) error) error {
	return s.write(ctx, &writeOp{run: func(w *wtx) error {
		return f(func(query string, args ...any) error {
			_, err := w.exec(query, args...)
			return err
		})
	}})
}

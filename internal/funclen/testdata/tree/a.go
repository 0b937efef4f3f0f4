package tree

func one() {}

func three() {
	_ = 1
}

type T[P any] struct{}

func (t *T[P]) method() {
	_ = 1
	_ = 2
}

package conformance

// inputEdgeTests are the conformance tests for edge inputs: values at and
// past the limits every backend must refuse identically.
func inputEdgeTests() []namedTest {
	return nil
}

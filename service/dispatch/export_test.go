package dispatch

// LeanHTTP tells the tests whether http:// targets go through h1.
const LeanHTTP = leanHTTP

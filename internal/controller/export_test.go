package controller

// FaultMessage is faultMessage, for the tests of package controller_test.
var FaultMessage = faultMessage

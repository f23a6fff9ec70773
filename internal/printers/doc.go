// Package printers renders Kubernetes objects the way kubectl does: tables with
// kubectl's columns (and -o wide extras), and -o json / -o yaml as a v1 List. It is
// pure: objects in, text out, with the clock passed in for the AGE column.
package printers

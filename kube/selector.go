package kube

import "k8s.io/apimachinery/pkg/labels"

func everything() labels.Selector { return labels.Everything() }

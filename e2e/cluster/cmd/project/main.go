// project: a ConfigMap volume as the kubelet keeps it, without a kubelet. It watches one
// ConfigMap and writes it into a directory with the kubelet's own code: configmap.MakePayload
// (the volume plugin's payload: keys to files, mode 0644) and volumeutil.AtomicWriter (the
// timestamped directory and the ..data symlink swapped by rename), on every change the API
// server reports, the way a configMap volume mounted without subPath is updated.
//
// Usage: project --kubeconfig FILE --namespace NS --name NAME --dir DIR [--optional]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/volume/configmap"
	volumeutil "k8s.io/kubernetes/pkg/volume/util"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server")
	namespace := flag.String("namespace", "", "the ConfigMap's namespace")
	name := flag.String("name", "", "the ConfigMap's name")
	dir := flag.String("dir", "", "the volume's directory (created if missing)")
	flag.Parse()
	if *kubeconfig == "" || *namespace == "" || *name == "" || *dir == "" {
		fmt.Fprintln(os.Stderr, "usage: project --kubeconfig FILE --namespace NS --name NAME --dir DIR")
		os.Exit(2)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	check(err)
	client := kubernetes.NewForConfigOrDie(cfg)
	check(os.MkdirAll(*dir, 0o755))
	writer, err := volumeutil.NewAtomicWriter(*dir, fmt.Sprintf("configmap %s/%s", *namespace, *name))
	check(err)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	selector := fields.OneTermEqualSelector("metadata.name", *name).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().ConfigMaps(*namespace).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().ConfigMaps(*namespace).Watch(ctx, o)
		},
	}
	mode := int32(v1.ConfigMapVolumeSourceDefaultMode)
	_, err = watchtools.UntilWithSync(ctx, lw, &v1.ConfigMap{}, nil, func(ev watch.Event) (bool, error) {
		cm, ok := ev.Object.(*v1.ConfigMap)
		if !ok {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			// The kubelet keeps the last files of a deleted ConfigMap until the pod goes.
			fmt.Fprintf(os.Stderr, "project: %s/%s deleted; the files stay\n", *namespace, *name)
			return false, nil
		}
		payload, err := configmap.MakePayload(nil, cm, &mode, false)
		if err != nil {
			fmt.Fprintf(os.Stderr, "project: %s/%s: %v\n", *namespace, *name, err)
			return false, nil
		}
		if err := writer.Write(payload, nil); err != nil {
			fmt.Fprintf(os.Stderr, "project: write %s: %v\n", *dir, err)
			return false, nil
		}
		fmt.Printf("projected %s/%s resourceVersion %s (%d keys)\n", *namespace, *name, cm.ResourceVersion, len(cm.Data))
		return false, nil
	})
	if err != nil && ctx.Err() == nil && !apierrors.IsNotFound(err) {
		check(err)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "project:", err)
		os.Exit(1)
	}
}

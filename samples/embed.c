/* The shortest complete ferry program: a loader over a dataset (an image
 * folder, a list file, tar shards, IDX images: ferry_dataset_open tells them
 * apart), one epoch on the default device (the GPU when there is one, its
 * slots pinned), batch shapes printed, and the first batch's labels read on
 * the host.
 *   build/samples/embed PATH */
#include <stdio.h>
#include <string.h>

#include <ferry.h>

/* A batch is on the loader's device: host code reads it after a copy to the
 * CPU (on a GPU, ferry_tensor_host_data refuses the batch itself). */
static ferry_status print_labels(const ferry_batch *b)
{
    ferry_tensor *host = NULL;
    void *p = NULL;
    ferry_status st = ferry_tensor_to(b->labels, ferry_cpu(), false, &host);
    if (st == FERRY_OK && (st = ferry_tensor_host_data(host, &p)) == FERRY_OK) {
        const int64_t *label = p;
        printf("labels:");
        for (size_t i = 0; i < b->size && i < 8; i++)
            printf(" %lld", (long long)label[i]);
        printf("%s\n", b->size > 8 ? " ..." : "");
    }
    ferry_tensor_release(host);
    return st;
}

int main(int argc, char **argv)
{
    /* --help: the usage on stdout; anything but one path: on stderr, status 2. */
    int help = argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"));
    if (argc != 2 || help || argv[1][0] == '-') {
        fprintf(help ? stdout : stderr, "usage: %s PATH   (DIR/<class>/<file>.png or "
                ".jpg, a list file, tar shards or IDX images)\n", argv[0]);
        return help ? 0 : 2;
    }
    ferry_dataset *ds;
    ferry_loader *loader = NULL;
    ferry_status st = ferry_dataset_open(argv[1], NULL, &ds);
    if (st == FERRY_OK) {
        ferry_loader_config cfg = {.dataset = ds, .batch_size = 256, .shuffle = true};
        st = ferry_loader_create(&cfg, &loader);
        ferry_dataset_release(ds); /* the loader keeps its own reference */
    }
    if (st != FERRY_OK) {
        fprintf(stderr, "embed: %s\n", ferry_last_error());
        return 1;
    }
    char dev[FERRY_DEVICE_NAME_MAX];
    printf("device: %s\n", ferry_device_format(ferry_loader_device(loader), dev, sizeof dev));

    ferry_batch b;
    while ((st = ferry_loader_next(loader, NULL, &b)) == FERRY_OK) {
        const int64_t *s = ferry_tensor_shape(b.images);
        printf("batch %zu: images [%lld, %lld, %lld, %lld] %s, labels [%lld]\n", b.index,
               (long long)s[0], (long long)s[1], (long long)s[2], (long long)s[3],
               ferry_dtype_name(ferry_tensor_dtype(b.images)), (long long)b.size);
        if (b.index == 0 && (st = print_labels(&b)) != FERRY_OK)
            break;
    }
    if (st != FERRY_END)
        fprintf(stderr, "embed: %s\n", ferry_last_error());
    ferry_loader_destroy(loader);
    return st == FERRY_END ? 0 : 1;
}

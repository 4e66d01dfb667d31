/* tape_tour: the tape on a worked example, printed step by step (docs/autograd.md walks
 * through its output).
 *
 *     h = x W        z = h + b        a = relu(z)        p = a * z        L = sum(p)
 *
 * z is used twice (by relu and by the product), so its gradient has two terms that must be
 * added: dL/dz = a (through p = a * z) + z * relu'(z) (through a). */
#include <stdio.h>
#include <stdlib.h>

#include "autograd/ops.h"
#include "cli/settings.h"
#include "examples/common/cli.h"

static void print_values(const char *label, const float *v, size_t n)
{
    printf("  %-8s [", label);
    for (size_t i = 0; i < n; i++)
        printf(i ? ", %g" : "%g", v[i]);
    printf("]\n");
}

static Tensor *named_param(const char *name, int rows, int cols, const float *values)
{
    Tensor *t = tensor_param(name, 2, (int[]){ rows, cols });
    for (size_t i = 0; i < t->size; i++)
        t->data[i] = values[i];
    return t;
}

static void usage(void)
{
    printf("Usage: tape_tour\n"
           "Records a five-op forward pass on a tape, prints the nodes, then runs backward and\n"
           "prints every gradient in the order backward produces it.\n"
           "  -h, --help   this text\n");
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    settings_parse(NULL, 0, NULL, NULL, 0, usage, argc, argv);     /* --help, nothing else */

    Tensor *x = named_param("x", 1, 2, (const float[]){ 1.0f, -2.0f });
    Tensor *w = named_param("W", 2, 2, (const float[]){ 0.5f, -1.0f, 0.25f, 1.5f });
    Tensor *b = tensor_param("b", 1, (int[]){ 2 });
    b->data[0] = 0.5f;
    b->data[1] = 1.0f;

    Tape *tape = tape_new();
    tape->keep_grads = true;   /* keep every b node so we can print it */
    Tensor *h = op_matmul(tape, x, w, false);
    Tensor *z = op_bias_add(tape, h, b);
    Tensor *a = op_relu(tape, z);
    Tensor *p = op_mul(tape, a, z);
    Tensor *loss = op_sum(tape, p);
    const char *names[] = { "h", "z", "a", "p", "L" };
    Tensor *outs[] = { h, z, a, p, loss };
    for (int k = 0; k < 5; k++)
        tensor_set_name(outs[k], names[k]);

    printf("forward (f nodes):\n");
    for (int k = 0; k < 5; k++)
        print_values(names[k], outs[k]->data, outs[k]->size);
    printf("\ntape, in recording order:\n");
    tape_print(tape, stdout);

    printf("\nbackward visits the nodes in reverse: ");
    for (int k = tape->n_nodes - 1; k >= 0; k--)
        printf("%s%s", tape->nodes[k].op, k ? " <- " : "\n");
    tape_backward(tape, loss);
    printf("\ngradients (b nodes), dL/d...:\n");
    for (int k = 4; k >= 0; k--)
        print_values(names[k], outs[k]->grad, outs[k]->size);
    print_values("b", b->grad, b->size);
    print_values("W", w->grad, w->size);
    print_values("x", x->grad, x->size);

    tape_free(tape);
    tensor_free(x);
    tensor_free(w);
    tensor_free(b);
    return 0;
}

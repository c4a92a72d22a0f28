/*
 * A small checkout service with a bug for Strobe to find.
 *
 * Bulk lines (10 or more of an item) get 10% off. Customers report that orders
 * with a bulk line cost less than they should. Run:
 *     strobe run examples/checkout/investigate.lua
 */
#include <stdio.h>
#include <time.h>

struct Item {
    const char *name;
    int price_cents;
    int quantity;
};

int apply_discount(int amount_cents, int quantity)
{
    if (quantity >= 10)
        return amount_cents * 90 / 100;
    return amount_cents;
}

int line_total(const struct Item *item)
{
    int subtotal = item->price_cents * item->quantity;
    return apply_discount(subtotal, item->quantity);
}

int order_total(const struct Item *items, int count)
{
    int total = 0;
    for (int i = 0; i < count; i++) {
        total += line_total(&items[i]);
        /* "Make sure bulk orders get their discount" -- but line_total already did. */
        total = apply_discount(total, items[i].quantity);
    }
    return total;
}

static void pause_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    (void)argv;
    const struct Item orders[][3] = {
        { { "pen", 150, 2 }, { "notebook", 400, 1 }, { "stapler", 900, 1 } },
        { { "pen", 150, 20 }, { "notebook", 400, 1 }, { "stapler", 900, 1 } },
        { { "paper", 500, 3 }, { "ink", 2500, 12 }, { "pen", 150, 1 } },
    };
    int rounds = argc > 1 ? 1 : 20; /* any argument: one pass only */
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("checkout service ready\n");
    for (int r = 0; r < rounds; r++) {
        for (int o = 0; o < 3; o++) {
            int total = order_total(orders[o], 3);
            printf("order %d: total %d.%02d\n", o + 1, total / 100, total % 100);
        }
        pause_ms(300);
    }
    fprintf(stderr, "checkout service stopping\n");
    return 0;
}

import datetime as dt
import sys

from reports.weekly import daily_totals, load_sales, weekly_total


def main(argv):
    sales = load_sales(argv[0])
    day = dt.date.fromisoformat(argv[1])
    for date, cents in sorted(daily_totals(sales, day).items()):
        print(f"{date}  {cents / 100:10.2f}")
    print(f"total       {weekly_total(sales, day) / 100:10.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])

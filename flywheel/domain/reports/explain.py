"""Plain-language explanations of every report figure, and the GPU rental benchmark band."""

from __future__ import annotations

from decimal import Decimal

# Plain-language meaning of each figure, for readers who never saw a GPU.
EXPLAIN = {
    "gpu": "A GPU is the specialised chip that runs AI models. The factory owns thousands of "
    "them; every figure below is about turning their time into text customers pay for.",
    "token": "A token is a piece of a word (about ¾ of an English word). Customers buy the "
    "tokens the models write for them, priced per million.",
    "realized_revenue": "What customers owe for the tokens they bought, after their negotiated "
    "discounts, volume tiers and promotional credits.",
    "minimum_shortfall": "Customers who committed to a minimum monthly spend and used less "
    "still pay the difference.",
    "sla_credits": "Money given back to customers when the service was down or too slow "
    "for longer than their contract allows.",
    "revenue_tie_out": "Months already closed take their revenue from the ledger (invoices "
    "rounded to the cent, late usage billed on later invoices): this is the ledger's revenue "
    "minus the rating's for those months; 0 when they agree.",
    "revenue": "Everything the factory earned in the period.",
    "depreciation": "The purchase price of the GPUs and servers, spread evenly over their "
    "useful life (straight line), for the part of it that falls in the period.",
    "energy_cost": "Electricity for the GPUs, plus cooling and the rest of the building "
    "(the PUE factor), at the contracted price per kWh.",
    "hosting": "Rent for the data-centre space, power connection, network and storage.",
    "cogs": "Cost of goods sold: what it costs to run the machines that make the tokens.",
    "gross_profit": "Revenue minus the cost of running the machines.",
    "gross_margin": "The share of each dollar of revenue left after running the machines.",
    "staff": "Salaries of the people who run the factory.",
    "sga": "Sales, general and administrative costs: selling, offices, finance, legal.",
    "opex": "Operating expenses: staff plus sales, general and administrative costs.",
    "ebitda": "Earnings before interest, taxes, depreciation and amortisation: the cash the "
    "factory's operations generate, before paying back the machines.",
    "ebit": "Operating profit: EBITDA minus the machines' depreciation.",
    "total_cost": "Every cost of the period: running the machines plus operating expenses.",
    "cost_per_million_tokens": "What it cost, all in, to make one million output tokens.",
    "cost_per_million_paid_tokens": "All costs divided over the tokens customers paid for.",
    "revenue_per_million_tokens": "What the factory earned for each million tokens it sold.",
    "daily_token_value_per_gpu": "Revenue one GPU earned per day, on average.",
    "tokens_per_kwh": "Output tokens made with one kilowatt-hour of electricity.",
    "energy_kwh": "Electricity used, building overhead included.",
    "capacity_sold": "The share of the GPUs' healthy time already sold: reserved by large "
    "customers, plus what the others bought on time by the token.",
    "reserved_share": "The share of the GPUs' healthy time large customers reserved for "
    "themselves, paying by the hour whether they use it or not.",
    "reservation_utilization": "How much of their reserved capacity those customers used; "
    "what they leave unused is still paid for.",
    "output_tokens": "Every token the models wrote, sold or not.",
    "paid_output_tokens": "Tokens customers paid for.",
    "installed_gpus": "GPUs installed, averaged over the period.",
    "cost_per_gpu_hour": "All-in cost of one GPU for one hour; GPU clouds rented an H100 for "
    "about 1.70–2.35 per hour on one-year contracts in 2025–26.",
    "capex_invested": "What the installed GPUs and their servers cost to buy.",
    "roi": "Return on investment: a year of operating profit at this period's pace, as a "
    "share of what the machines cost.",
    "payback_years": "Years of cash from operations (EBITDA at this period's pace) needed to "
    "pay back what the machines cost.",
    "asset_turnover": "A year of revenue at this period's pace, per dollar of machines.",
    "equivalent_gpus": "How many GPUs a typical data centre (working at the baseline TEF) "
    "would need to make what this factory made.",
    "avoided_capex": "What buying those extra GPUs would have cost: the value of running the "
    "factory better than a typical one.",
    "availability": "Share of the time the GPUs were healthy (not broken or in maintenance).",
    "occupancy": "Share of the healthy time the GPUs were put to work on customer requests.",
    "efficiency": "How much the working GPUs produced compared with their rated speed.",
    "tef": "Token Efficiency Factor: the share of all GPU time that turned into tokens at the "
    "rated speed (availability × occupancy × efficiency).",
    "sla_delivery": "Share of the production delivered within the promised speed and "
    "reliability (the SLA).",
    "sell_through": "Share of the well-delivered production that a paying customer bought "
    "(the rest went to trials, internal use or free allowances).",
    "price_realization": "Share of the list price actually collected, after discounts.",
    "tfi": "Token Factory Index: the share of GPU time that became tokens delivered on "
    "time, sold, at full list price (TEF × SLA delivery × sell-through × price realization).",
    "tps": "Output tokens written per second, on average.",
    "theoretical_tps": "What every installed GPU would write per second at its rated speed.",
}

RENTAL_BAND = (Decimal("1.70"), Decimal("2.35"))  # H100 per GPU-hour, demo-factory.md

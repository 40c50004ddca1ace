"""Domain ``organisations``: an industrial company and a university. Questions are marked with *.

* ``company`` (12 paragraphs, 9 questions): overview naming the company (headquarters, employees, products, chief
  executive*); sales and service; history (founder*, joint-stock company, family stake); finances (revenue*, profit,
  exports, research spending, patents); largest factory (where*, area, staff); the worst crisis (finance director);
  best-known product range*; technology centre (engineers and scientists*); ownership (largest shareholder*,
  supervisory board); workforce (apprentices*, works council); headquarters and company museum; acquisitions
  (largest acquisition*). Entity names are an invented word, alone or with an all-capitals legal form ("Velmora
  AG"). Later paragraphs say "the company", "the group", "the firm".
* ``university`` (12 paragraphs, 9 questions): overview naming the university (students*, staff, rector);
  international (partners, summer school, guest house); history (founding year*, first rector, medicine); faculties
  (teaching hospital beds*); research (income*, institutes, papers); library (medieval manuscripts*, reading room);
  observatory (telescope, curator); students (international share, housing rooms*, festival); campus (clock tower's
  height*, botanical garden, science park); alumni (a writer, the mathematician who was its most famous teacher*);
  budget, rowing club (founding year*) and choir; governance (senate, trustees, chairs). Entity names are
  "<W> University"; only the invented word counts as naming it ("university" is a generic word of the theme
  matcher). Later paragraphs say "the university".
"""

from __future__ import annotations

from curation.sources.controlled.template import (
    FEW,
    MANY,
    MONTHS,
    PERSON,
    PLACE,
    SEVERAL,
    Choice,
    Later,
    Name,
    Number,
    Template,
    Year,
)

PRODUCTS = Choice(("valves", "pumps", "compressors", "bearings", "cables", "coatings", "fittings", "gearboxes"))

COMPANY = Template(
    name="company",
    domain="organisations",
    noun="company",
    entity=Name(("{W}", "{W} AG", "{W} SA", "{W} NV")),
    paragraphs=(
        "{entity} is an {company_kind} headquartered in {hq_city}, with about {employees} employees and factories "
        "in {plant_countries} countries. It makes {product_a} and {product_b} for customers in industry and the "
        "building trade, and its shares are listed on the stock exchange of the capital. The chief executive is "
        "{ceo}, who came from a rival firm and has led the group through a long programme of restructuring.",
        "A sales network of {sales_offices} serves customers around the world, and a service organisation of "
        "{technicians} repairs machines on site. The largest single customer, a state water utility, buys about "
        "{customer_share} of the group's output of pumps. Spare parts for machines built decades ago can still be "
        "ordered from the archive of drawings kept at the headquarters.",
        "The firm was founded in {company_founded} by the engineer {founder}, who began by repairing steam engines "
        "in a rented shed beside the canal. It became a joint-stock company in {stock_year}, after a bank loan of "
        "{founding_loan} paid for its first large factory, and it survived two wars by making spare parts for the "
        "{railway}. The founder's family kept a controlling stake until {family_sold}, when it was sold to a group "
        "of pension funds.",
        "Last year the group's revenue reached {revenue}, and its operating profit was {profit}, a margin slightly "
        "above the industry average. About {export_share} of sales are made abroad, most of them in neighbouring "
        "countries. The company spends {research_share} of its revenue on research and development, and it holds "
        "some {patents}, a number that has doubled over the last decade.",
        "The largest factory, at {main_plant}, covers {plant_area} and employs about {plant_staff} on three shifts. "
        "It was built in {plant_year} on the site of a former brickworks and has been extended {extensions} times "
        "since. A second plant at {second_plant} makes castings for the whole group, and a logistics centre beside "
        "the motorway ships spare parts to any customer within a day.",
        "The worst crisis came when orders collapsed during a long recession: the workforce was cut by {job_cuts} "
        "in two years, and a factory in the south was closed. A rescue plan drawn up by the finance director of the "
        "time, {finance_director}, sold the shipbuilding division and paid off the banks within {rescue_years} "
        "years, and the shares have since risen more than tenfold.",
        "The best-known product is the {flagship} range, launched in {flagship_year} and sold in "
        "{flagship_markets}; its sales passed {flagship_units} units last year. Engineers at the company also "
        "developed an early electronic control system, which the group licensed to several rivals. Customers range "
        "from shipyards and power stations to breweries and water utilities.",
        "Research is concentrated at a technology centre in {tech_town}, where {researchers} and scientists work on "
        "new materials and digital controls. The centre cooperates with the technical university of the region and "
        "funds {doctoral} doctoral students each year. Its director, {cto}, is a physicist who joined from a "
        "national laboratory and sits on the management board.",
        "The largest shareholder is the {investor}, which holds {stake} of the shares; the rest are widely held by "
        "institutions and private investors. The supervisory board of {board} members is chaired by {chair}, a "
        "former minister of industry. Employees elect half of the board, under the country's rules on "
        "co-determination, and the chair has the casting vote.",
        "The company trains about {apprentices} a year in its own workshops, and most of them stay on after they "
        "qualify. The average length of service is {service_years}, and staff turnover is among the lowest in the "
        "industry. A works council led by {council_head} negotiates pay with the management each spring, and the "
        "last strike, over working hours, ended after {strike_days} days.",
        "The headquarters, a brick building beside the old canal, was designed by {hq_architect} and now also "
        "houses a company museum of {museum_machines}, from the first steam pumps to modern control units. A works "
        "choir and a football team of employees meet in the former canteen, and the annual summer party for staff "
        "and their families fills the courtyard with about {party_guests} guests.",
        "In recent years the group has bought {acquisitions} smaller firms, the largest of them {acquired}, a maker "
        "of control software, for {acquisition_price}. The company has pledged to cut its carbon emissions by half "
        "within a decade, and solar panels now cover the roofs of most of its plants. Its foundation supports "
        "schools and music in {foundation_towns} towns where it has factories.",
    ),
    slots={
        "company_kind": Choice(("engineering group", "industrial manufacturer", "industrial group")),
        "hq_city": PLACE,
        "employees": Number(1_200, 89_000, step=100),
        "plant_countries": SEVERAL,
        "product_a": PRODUCTS,
        "product_b": Choice(("control systems", "sensors", "filters", "seals", "heat exchangers")),
        "ceo": PERSON,
        "railway": Name(("{W} Railway", "{W} Railway Company")),
        "founding_loan": Number(120, 990, unit=" thousand crowns"),
        "second_plant": PLACE,
        "council_head": PERSON,
        "sales_offices": Number(40, 390, unit=" offices"),
        "technicians": Number(600, 9_900, step=10, unit=" technicians"),
        "customer_share": Number(21, 190, decimals=1, unit=" percent"),
        "company_founded": Year(1800, 1919),
        "founder": PERSON,
        "stock_year": Later("company_founded", 10, 35),
        "family_sold": Later("stock_year", 20, 60),
        "revenue": Number(12, 490, decimals=1, unit=" billion euros"),
        "profit": Number(80, 2_900, step=5, unit=" million euros"),
        "export_share": Number(350, 890, decimals=1, unit=" percent"),
        "research_share": Number(15, 140, decimals=1, unit=" percent"),
        "patents": Number(300, 9_900, step=10, unit=" patents"),
        "main_plant": PLACE,
        "plant_area": Number(12, 390, unit=" hectares"),
        "plant_staff": Number(900, 9_900, step=10, unit=" people"),
        "plant_year": Later("company_founded", 20, 60),
        "extensions": FEW,
        "job_cuts": Number(800, 9_900, step=10, unit=" jobs"),
        "finance_director": PERSON,
        "rescue_years": FEW,
        "flagship": PLACE,
        "flagship_year": Later("company_founded", 40, 95),
        "flagship_markets": Number(20, 160, unit=" markets"),
        "flagship_units": Number(12_000, 990_000, step=1000),
        "tech_town": PLACE,
        "researchers": Number(120, 2_900, step=5, unit=" engineers"),
        "doctoral": SEVERAL,
        "cto": PERSON,
        "investor": Name(("{W} Pension Fund", "{W} Foundation", "{W} Holdings")),
        "stake": Number(105, 490, decimals=1, unit=" percent"),
        "board": Choice(("twelve", "sixteen", "twenty")),
        "chair": PERSON,
        "apprentices": Number(40, 990, step=5, unit=" apprentices"),
        "service_years": Number(80, 240, decimals=1, unit=" years"),
        "strike_days": SEVERAL,
        "hq_architect": PERSON,
        "museum_machines": Number(40, 390, unit=" machines"),
        "party_guests": Number(2_000, 19_000, step=100),
        "acquisitions": FEW,
        "acquired": Name(("{W} Systems", "{W} Software", "{W} Controls")),
        "acquisition_price": Number(12, 990, unit=" million euros"),
        "foundation_towns": SEVERAL,
    },
    questions={
        "ceo": "Who is the chief executive of {entity}?",
        "founder": "Who founded {entity}?",
        "revenue": "What was the revenue of {entity} last year?",
        "main_plant": "Where is the largest factory of {entity}?",
        "flagship": "What is the best-known product range of {entity}?",
        "researchers": "How many engineers and scientists work at the technology centre of {entity}?",
        "investor": "Who is the largest shareholder of {entity}?",
        "apprentices": "How many apprentices does {entity} train a year?",
        "acquired": "Which firm was the largest acquisition of {entity}?",
    },
)

UNIVERSITY = Template(
    name="university",
    domain="organisations",
    noun="university",
    entity=Name(("{W} University",)),
    paragraphs=(
        "{entity} is a public research university in {uni_city}, with about {uni_students} students and "
        "{uni_staff} spread over {campuses} campuses. It is best known for its schools of medicine "
        "and engineering, and it regularly appears among the leading universities of the country. The rector, "
        "{rector}, was elected by the senate and began a second term this autumn.",
        "The university has exchange agreements with {partners} abroad and runs a summer school that "
        "brings about {summer_school} to the city each July. Its language centre teaches {languages} "
        "languages, and a guest house for visiting professors, the {guest_house}, stands in the park beside the "
        "old observatory, surrounded by lime trees planted by the first professors.",
        "The university was founded in {uni_founded} by a royal charter, as a college for the training of priests "
        "and lawyers. Its first rector was the theologian {first_rector}, who wrote its statutes in Latin. Medicine "
        "was added in {medicine_year}, and the natural sciences followed in the next century, when a chemistry "
        "laboratory was built in the former palace garden.",
        "Today the university has {faculty_count} faculties. The largest, the faculty of engineering, teaches "
        "{eng_students} students, while the medical school runs a teaching hospital of {hospital_beds} in the "
        "city centre. The dean of engineering, {dean}, has built up a strong programme in robotics that attracts "
        "students from across the continent.",
        "Research income reached {research_income} last year, much of it from national funding agencies and "
        "industry. The university hosts {institutes} research institutes, the best known of which, the "
        "{institute}, studies climate and water. Its scientists publish about {papers} papers a year, and "
        "{nobel} of its former professors have received a Nobel prize.",
        "The main library, the {library}, holds {uni_books} volumes and a collection of {manuscripts}"
        ", among them a richly illuminated gospel book. Its reading room, under a glass dome, seats "
        "{reading_seats} and is open around the clock during the examination weeks. The library was "
        "designed by the architect {uni_architect} after a fire destroyed the old one.",
        "The old observatory still houses a refracting telescope of {telescope_cm} aperture and a collection of "
        "{instruments}, from astrolabes to early clocks. Its curator, {curator}, opens the "
        "dome to the public on clear Friday evenings, when queues form across the park, and gives a lecture on "
        "the history of astronomy at the start of every term.",
        "About {intl_share} of the students come from abroad, most of them for master's programmes taught in "
        "English. Tuition is free for students from the country, and student housing offers {dorm_rooms} in "
        "halls around the campuses. The student union runs a newspaper, a radio station and the "
        "{student_festival}, a week of concerts held each {uni_month}.",
        "The main campus occupies {campus_ha} on the slopes above the old town, and its landmark is a clock tower "
        "of {clock_m} built in the style of a medieval belfry. A botanical garden founded by the medical faculty "
        "grows about {plant_species} species of plants. A science park beside the campus houses {startups}"
        " founded by graduates.",
        "Among the alumni are {presidents} presidents of the republic and the writer {alumnus}, whose novels about "
        "student life are still read in schools. The alumni association, with {alumni_members} members, raises "
        "money for scholarships. The most famous teacher of the university was the mathematician "
        "{mathematician}, whose lecture notes were copied by hand for decades.",
        "The annual budget of the university is about {uni_budget}, two thirds of it from the state. Its rowing "
        "club, founded by students in {rowing_year}, races every spring against a rival university on the river, "
        "and the boathouse holds {boats}. The university choir, with {choir_singers}, tours abroad "
        "every summer.",
        "The university is governed by a senate of {senate} members and a board of trustees chaired by "
        "{trustee_chair}, a former judge of the supreme court. Professors are appointed by the board on the "
        "advice of the faculties, and about {chairs} hold chairs today, a third of them women; the oldest chair, "
        "in rhetoric, has been held without a break since the founding.",
    ),
    slots={
        "uni_city": PLACE,
        "uni_students": Number(6_000, 68_000, step=100),
        "uni_staff": Number(400, 6_900, step=10, unit=" academic staff"),
        "campuses": FEW,
        "rector": PERSON,
        "partners": Number(120, 690, unit=" universities"),
        "summer_school": Number(300, 2_900, step=5, unit=" students"),
        "languages": MANY,
        "guest_house": Name(("{W} House", "{W} Lodge")),
        "uni_founded": Year(1300, 1899),
        "first_rector": PERSON,
        "medicine_year": Later("uni_founded", 20, 120),
        "faculty_count": SEVERAL,
        "eng_students": Number(1_200, 14_900, step=10),
        "hospital_beds": Number(300, 2_400, step=5, unit=" beds"),
        "dean": PERSON,
        "research_income": Number(40, 990, step=5, unit=" million euros"),
        "institutes": Choice(("twelve", "fourteen", "seventeen", "twenty-one", "twenty-six")),
        "institute": Name(("{W} Institute", "{W} Centre")),
        "papers": Number(1_500, 14_000, step=10),
        "nobel": FEW,
        "library": Name(("{W} Library", "{W} Hall")),
        "uni_books": Number(400_000, 9_900_000, step=10_000),
        "manuscripts": Number(120, 4_900, step=10, unit=" medieval manuscripts"),
        "reading_seats": Number(150, 1_400, step=5, unit=" readers"),
        "uni_architect": PERSON,
        "telescope_cm": Number(250, 990, decimals=1, unit=" centimetres"),
        "instruments": Number(120, 1_900, step=5, unit=" historical instruments"),
        "curator": PERSON,
        "intl_share": Number(40, 390, decimals=1, unit=" percent"),
        "dorm_rooms": Number(800, 14_000, step=10, unit=" rooms"),
        "student_festival": Name(("{W} Week", "{W} Festival")),
        "uni_month": MONTHS,
        "campus_ha": Number(20, 490, unit=" hectares"),
        "clock_m": Number(200, 990, decimals=1, unit=" metres"),
        "plant_species": Number(1_200, 14_000, step=10),
        "startups": Number(20, 390, unit=" companies"),
        "presidents": FEW,
        "alumnus": PERSON,
        "alumni_members": Number(8_000, 140_000, step=100),
        "mathematician": PERSON,
        "uni_budget": Number(150, 2_900, step=5, unit=" million euros"),
        "rowing_year": Year(1820, 1959),
        "boats": Number(20, 160, unit=" boats"),
        "choir_singers": Number(40, 190, unique=False, unit=" singers"),
        "senate": Choice(("thirty-one", "forty-five", "fifty-one", "sixty")),
        "trustee_chair": PERSON,
        "chairs": Number(210, 1_900, step=5, unit=" professors"),
    },
    questions={
        "uni_students": "How many students does {entity} have?",
        "uni_founded": "In which year was {entity} founded?",
        "hospital_beds": "How many beds does the teaching hospital of {entity} have?",
        "research_income": "What was the research income of {entity} last year?",
        "manuscripts": "How many medieval manuscripts does the library of {entity} hold?",
        "dorm_rooms": "How many rooms does the student housing of {entity} offer?",
        "clock_m": "How tall is the clock tower of {entity}?",
        "mathematician": "Which mathematician was the most famous teacher of {entity}?",
        "rowing_year": "In which year was the rowing club of {entity} founded?",
    },
)

TEMPLATES = (COMPANY, UNIVERSITY)
